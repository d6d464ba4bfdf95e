"""The contract gates catch what they exist to catch.

buf breaking must refuse a deleted field, the wire numbers PRODUCT.md lists
must hold, and the gen/ drift check must notice a hand edit. Each gate runs
on a copy in a temporary folder, so a teammate's in-progress edit to proto/
or gen/ cannot make these tests flaky.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil
import subprocess
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor

from compass.v1 import agent_gateway_pb2, comms_pb2

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The venv's own buf: the one dev.py runs.
BUF = pathlib.Path(sys.executable).parent / "buf"


def _buf(cwd: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BUF), *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
    )


@pytest.fixture
def contract_copy(tmp_path: pathlib.Path) -> pathlib.Path:
    """proto/ and buf.yaml in a fresh folder, with an image of them as old.binpb."""
    shutil.copytree(ROOT / "proto", tmp_path / "proto")
    shutil.copy2(ROOT / "buf.yaml", tmp_path / "buf.yaml")
    built = _buf(tmp_path, "build", "-o", "old.binpb")
    assert built.returncode == 0, built.stderr
    return tmp_path


# --- buf breaking ------------------------------------------------------------


def test_unchanged_contract_passes_buf_breaking(contract_copy: pathlib.Path) -> None:
    result = _buf(contract_copy, "breaking", "--against", "old.binpb")
    assert result.returncode == 0, result.stdout + result.stderr


def test_deleting_a_field_fails_buf_breaking(contract_copy: pathlib.Path) -> None:
    comms = contract_copy / "proto" / "compass" / "v1" / "comms.proto"
    source = comms.read_text()
    field = "  bool cancelled = 4;\n"
    assert source.count(field) == 1
    comms.write_text(source.replace(field, ""))

    result = _buf(contract_copy, "breaking", "--against", "old.binpb", "--error-format", "json")

    # 100 is buf's exit code for "the check found problems".
    assert result.returncode == 100, result.stdout + result.stderr
    problems = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert [(p["type"], p["path"]) for p in problems] == [
        ("FIELD_NO_DELETE", "proto/compass/v1/comms.proto")
    ]
    assert '"cancelled"' in problems[0]["message"]


# --- wire numbers --------------------------------------------------------------


# Any: the upb runtime's Descriptor is not the stubs' Descriptor class.
def _numbers(descriptor: Any) -> dict[str, int]:
    return {f.name: f.number for f in descriptor.fields}


WIRE_NUMBERS: dict[str, dict[str, int]] = {
    "Ask": {
        "ask_id": 1,
        "questions": 2,
        "answered": 3,
        "cancelled": 4,
        "deadline": 5,
        "timeout": 6,
        "answerer_account_ids": 7,
        "answerer_handles": 8,
        "ending": 9,
        "quorum": 20,
        "declines_count_against_quorum": 21,
        "quorum_votes": 22,
        "follow_up": 70,
        "follow_up_steps": 71,
    },
    "AskEnding": {
        "kind": 1,
        "actor_account_id": 2,
        "actor_handle": 3,
        "ended_at": 4,
        "surface": 5,
        "reason": 6,
        "standing_answer_id": 20,
        "receipt": 40,
    },
    "AskHistoryEntry": {
        "kind": 1,
        "actor_account_id": 2,
        "actor_handle": 3,
        "at": 4,
        "surface": 5,
        "reason": 6,
        "standing_answer_id": 20,
        "receipt": 40,
    },
    "DeclineAskRequest": {"ask_id": 1, "reason": 2},
    "WithdrawAskRequest": {"ask_id": 1},
    "GetAskHistoryRequest": {"ask_id": 1},
    "GetAskHistoryResponse": {
        "ask_id": 1,
        "entries": 2,
        "caller_may_answer": 3,
        "caller_may_withdraw": 4,
    },
    "AskQuestion": {
        "question_id": 1,
        "question": 2,
        "header": 3,
        "options": 4,
        "allow_multiple": 5,
        "recommended": 6,
        "chosen_option_ids": 7,
        "custom_text": 8,
        "timed_out": 9,
    },
    "AskOption": {"id": 1, "label": 2, "description": 3, "preview": 4},
    "RespondToAskRequest": {"ask_id": 1, "answers": 2, "standing": 20},
    "AskQuestionAnswer": {"question_id": 1, "chosen_option_ids": 2, "custom_text": 3},
    "QuorumVote": {
        "account_id": 1,
        "handle": 2,
        "kind": 3,
        "answers": 4,
        "reason": 5,
        "at": 6,
        "surface": 7,
        "standing_answer_id": 8,
    },
    "QuorumAnswer": {"question_id": 1, "chosen_option_ids": 2, "custom_text": 3},
    "AskAnswerBlock": {
        "ask_id": 1,
        "ask_message_id": 2,
        "questions": 3,
        "quorum_votes": 20,
        "receipt": 40,
    },
    "StandingAnswerTerms": {"duration": 1, "include_subagents": 2},
}


@pytest.mark.parametrize("message", sorted(WIRE_NUMBERS))
def test_ask_messages_keep_their_wire_numbers(message: str) -> None:
    descriptor = comms_pb2.DESCRIPTOR.message_types_by_name[message]
    assert _numbers(descriptor) == WIRE_NUMBERS[message]


def test_ask_field_kinds_match_the_contract() -> None:
    ask = comms_pb2.Ask.DESCRIPTOR.fields_by_name
    assert ask["questions"].message_type is comms_pb2.AskQuestion.DESCRIPTOR
    assert ask["questions"].is_repeated
    question = comms_pb2.AskQuestion.DESCRIPTOR.fields_by_name
    assert question["options"].message_type is comms_pb2.AskOption.DESCRIPTOR
    # proto3 `optional`: unset is distinguishable from 0.
    assert question["recommended"].has_presence
    assert question["recommended"].type == FieldDescriptor.TYPE_INT32
    answers = comms_pb2.RespondToAskRequest.DESCRIPTOR.fields_by_name["answers"]
    assert answers.message_type is comms_pb2.AskQuestionAnswer.DESCRIPTOR
    assert answers.is_repeated


def test_comms_call_request_arms() -> None:
    request = agent_gateway_pb2.CommsCallRequest.DESCRIPTOR
    fields = request.fields_by_name
    call = request.oneofs_by_name["call"]

    assert fields["cancel_ask"].number == 13
    assert fields["cancel_ask"].containing_oneof is call
    assert fields["cancel_ask"].message_type is agent_gateway_pb2.CancelAskRequest.DESCRIPTOR
    assert _numbers(agent_gateway_pb2.CancelAskRequest.DESCRIPTOR) == {"ask_id": 1}
    assert fields["set_status"].containing_oneof is call

    traceparent = fields["trigger_traceparent"]
    assert traceparent.number == 10
    assert traceparent.type == FieldDescriptor.TYPE_STRING
    assert traceparent.containing_oneof is None


def test_comms_call_result_arms() -> None:
    result = agent_gateway_pb2.CommsCallResult.DESCRIPTOR
    fields = result.fields_by_name
    outcome = result.oneofs_by_name["result"]

    assert fields["cancel_ask"].number == 13
    assert fields["cancel_ask"].containing_oneof is outcome
    assert fields["cancel_ask"].message_type is agent_gateway_pb2.CancelAskResponse.DESCRIPTOR
    assert agent_gateway_pb2.CancelAskResponse.DESCRIPTOR.fields == []
    error = fields["error"]
    assert error.containing_oneof is outcome
    assert _numbers(error.message_type) == {"code": 1, "message": 2}


def _reachable(descriptor: Any) -> set[str]:
    seen: set[str] = set()
    stack = [descriptor]
    while stack:
        current = stack.pop()
        if current.full_name in seen:
            continue
        seen.add(current.full_name)
        stack.extend(f.message_type for f in current.fields if f.message_type is not None)
    return seen


def test_no_call_arm_can_answer_an_ask() -> None:
    answering = {
        comms_pb2.RespondToAskRequest.DESCRIPTOR.full_name,
        comms_pb2.AskQuestionAnswer.DESCRIPTOR.full_name,
    }
    call = agent_gateway_pb2.CommsCallRequest.DESCRIPTOR.oneofs_by_name["call"]
    assert call.fields, "the oneof has arms"
    for arm in call.fields:
        assert arm.message_type is not None, arm.name
        # Not the arm itself, nor anything nested inside it.
        assert not (_reachable(arm.message_type) & answering), arm.name
    assert not {f.name for f in call.fields} & {"respond_to_ask", "answer_ask"}


# --- gen/ drift ----------------------------------------------------------------


@pytest.fixture(scope="module")
def generated_repo(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A copy of the repo's contract parts with dev.py, and a gen/ it made."""
    root = tmp_path_factory.mktemp("contract") / "repo"
    root.mkdir()
    shutil.copytree(ROOT / "proto", root / "proto")
    shutil.copytree(ROOT / "tools", root / "tools")
    for name in ("dev.py", "buf.yaml", "buf.gen.yaml"):
        shutil.copy2(ROOT / name, root / name)
    with pytest.MonkeyPatch.context() as patch:
        dev = _load_dev(root, patch)
        dev.generate(root.joinpath(*dev.GEN.parts))
    return root


def _load_dev(root: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    # dev.py takes ROOT from its own path, so every buf run and every write of
    # the copy stays under root; only the venv (buf, plugins) is shared.
    monkeypatch.setenv("COMPASS_VENV", str(pathlib.Path(sys.executable).parent.parent))
    spec = importlib.util.spec_from_file_location("compass_dev_copy", root / "dev.py")
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    assert root.samefile(dev.ROOT)
    return dev


def _gen(dev: types.ModuleType) -> pathlib.Path:
    return dev.ROOT.joinpath(*dev.GEN.parts)


@pytest.fixture
def dev_on_copy(
    generated_repo: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> types.ModuleType:
    """dev.py loaded from this test's own copy of generated_repo."""
    root = tmp_path / "repo"
    shutil.copytree(generated_repo, root)
    return _load_dev(root, monkeypatch)


def test_generated_tree_is_complete(dev_on_copy: types.ModuleType) -> None:
    tree = dev_on_copy._tree(_gen(dev_on_copy))
    assert {
        "compass/__init__.py",
        "compass/v1/__init__.py",
        "compass/v1/comms_pb2.py",
        "compass/v1/comms_pb2.pyi",
        "compass/v1/comms_pb2_grpc.py",
        "compass/v1/comms_connect.py",
        "compass/v1/agent_gateway_pb2.py",
    } <= set(tree)


def test_drift_check_passes_on_a_fresh_tree(
    dev_on_copy: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    # Generating twice gives the same bytes: the check is deterministic.
    dev_on_copy.check_drift()
    assert "gen/ matches proto/" in capsys.readouterr().out


def test_drift_check_fails_on_a_one_byte_hand_edit(
    dev_on_copy: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    edited = _gen(dev_on_copy) / "compass" / "v1" / "comms_pb2.py"
    data = bytearray(edited.read_bytes())
    data[len(data) // 2] ^= 0x01
    edited.write_bytes(bytes(data))

    with pytest.raises(SystemExit) as exit_info:
        dev_on_copy.check_drift()

    assert exit_info.value.code == 1
    out = capsys.readouterr().out
    assert "compass/v1/comms_pb2.py" in out
    assert "compass/v1/comms_pb2.pyi" not in out


def test_drift_check_fails_on_a_stray_generated_file(
    dev_on_copy: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    (_gen(dev_on_copy) / "compass" / "v1" / "handmade.py").write_text("x = 1\n")

    with pytest.raises(SystemExit) as exit_info:
        dev_on_copy.check_drift()

    assert exit_info.value.code == 1
    assert "compass/v1/handmade.py" in capsys.readouterr().out


# --- buf breaking against the few contracts before this one ----------------------

DELETED = "  bool cancelled = 4;\n"


@pytest.fixture
def history(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., types.ModuleType]:
    """A git repository of the contract on `main`; `commit(edit)` commits an
    edit of comms.proto, `dev(where)` loads dev.py of a clone or the repository."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(ROOT / "proto", root / "proto")
    for name in ("dev.py", "buf.yaml"):
        shutil.copy2(ROOT / name, root / name)
    for key in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{key}_NAME", "Ada")
        monkeypatch.setenv(f"GIT_{key}_EMAIL", "ada@example.com")
    monkeypatch.delenv("COMPASS_BREAKING_AGAINST", raising=False)
    _run_git(root, "init", "--quiet", "--initial-branch", "main")
    _run_git(root, "add", ".")
    _run_git(root, "commit", "--quiet", "-m", "the contract")

    def dev(where: pathlib.Path = root) -> types.ModuleType:
        return _load_dev(where, monkeypatch)

    dev.root = root  # type: ignore[attr-defined]
    return dev


def _run_git(cwd: pathlib.Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def _edit(root: pathlib.Path, *, delete_field: bool, commit: str | None = None) -> None:
    comms = root / "proto" / "compass" / "v1" / "comms.proto"
    source = comms.read_text()
    comms.write_text(source.replace(DELETED, "") if delete_field else source + "// a note\n")
    if commit:
        _run_git(root, "commit", "--quiet", "-am", commit)


def _breaking(dev: types.ModuleType, capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        dev.check_breaking()
        code = 0
    except SystemExit as exit_info:
        code = int(exit_info.code or 0)
    out = capfd.readouterr()
    return code, out.out + out.err


def test_a_branch_that_deletes_a_field_fails_against_its_merge_base(
    history: Callable[..., types.ModuleType], capfd: pytest.CaptureFixture[str]
) -> None:
    root = history.root  # type: ignore[attr-defined]
    _run_git(root, "checkout", "--quiet", "-b", "feature")
    _edit(root, delete_field=True, commit="drop cancelled")
    _edit(root, delete_field=False, commit="a later commit")

    code, out = _breaking(history(), capfd)

    assert code == 100, out
    assert "against the merge base with main" in out
    assert '"cancelled"' in out


def test_history_before_the_merge_base_is_not_walked(
    history: Callable[..., types.ModuleType], capfd: pytest.CaptureFixture[str]
) -> None:
    # A break that landed on main long ago is main's history, not this branch's.
    root = history.root  # type: ignore[attr-defined]
    _edit(root, delete_field=True, commit="an old break on main")
    _edit(root, delete_field=False, commit="main moves on")
    _run_git(root, "checkout", "--quiet", "-b", "feature")
    _edit(root, delete_field=False, commit="the branch's change")

    code, out = _breaking(history(), capfd)

    assert code == 0, out
    assert "buf breaking: no breaking change" in out


def test_a_fresh_clone_of_main_checks_what_its_last_commit_changed(
    history: Callable[..., types.ModuleType],
    capfd: pytest.CaptureFixture[str],
    tmp_path: pathlib.Path,
) -> None:
    root = history.root  # type: ignore[attr-defined]
    _edit(root, delete_field=True, commit="a break on main")
    _run_git(tmp_path, "clone", "--quiet", str(root), "clone")

    code, out = _breaking(history(tmp_path / "clone"), capfd)

    assert code == 100, out
    assert "against the commit before HEAD" in out


def test_a_shallow_clone_compares_with_nothing_it_lacks_and_passes(
    history: Callable[..., types.ModuleType],
    capfd: pytest.CaptureFixture[str],
    tmp_path: pathlib.Path,
) -> None:
    root = history.root  # type: ignore[attr-defined]
    _edit(root, delete_field=False, commit="main moves on")
    _run_git(tmp_path, "clone", "--quiet", "--depth", "1", f"file://{root}", "clone")

    code, out = _breaking(history(tmp_path / "clone"), capfd)

    assert code == 0, out
    assert "no earlier commit to compare with (a shallow clone)" in out


def test_a_clone_without_main_compares_with_the_commit_before_head(
    history: Callable[..., types.ModuleType],
    capfd: pytest.CaptureFixture[str],
    tmp_path: pathlib.Path,
) -> None:
    root = history.root  # type: ignore[attr-defined]
    _run_git(root, "checkout", "--quiet", "-b", "feature")
    _edit(root, delete_field=False, commit="a fine change")
    _run_git(
        tmp_path, "clone", "--quiet", "--single-branch", "--branch", "feature", str(root), "ok"
    )
    _edit(root, delete_field=True, commit="a break")
    _run_git(
        tmp_path, "clone", "--quiet", "--single-branch", "--branch", "feature", str(root), "bad"
    )

    assert _breaking(history(tmp_path / "ok"), capfd)[0] == 0
    code, out = _breaking(history(tmp_path / "bad"), capfd)

    assert code == 100, out
    assert "against the commit before HEAD" in out


def test_the_last_release_tag_is_compared_too(
    history: Callable[..., types.ModuleType], capfd: pytest.CaptureFixture[str]
) -> None:
    root = history.root  # type: ignore[attr-defined]
    _run_git(root, "tag", "v0.1.0")
    _edit(root, delete_field=True, commit="a break after the release")
    _run_git(root, "checkout", "--quiet", "-b", "feature")
    _edit(root, delete_field=False, commit="the branch's change")

    code, out = _breaking(history(), capfd)

    assert code == 100, out
    assert "against the release v0.1.0" in out


def test_an_uncommitted_edit_is_compared_with_head(
    history: Callable[..., types.ModuleType], capfd: pytest.CaptureFixture[str]
) -> None:
    root = history.root  # type: ignore[attr-defined]
    _edit(root, delete_field=False, commit="main moves on")
    _edit(root, delete_field=True)

    code, out = _breaking(history(), capfd)

    assert code == 100, out
    assert "against HEAD, for uncommitted edits" in out
