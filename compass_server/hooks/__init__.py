"""Harness hooks: the policy of who answers what, and requests held on their ask."""
