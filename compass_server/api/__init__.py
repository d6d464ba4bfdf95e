"""Servicers: wire ⇄ store mapping, the one error table, sign-in rules."""
