"""Reaching people where they are: mail about the asks they are to answer."""
