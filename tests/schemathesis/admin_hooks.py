"""Schemathesis hooks for skiplock's operator API (loaded through admin.toml).

They keep the run meaningful without changing what the server is asked to accept: a generated token's
validity window is kept valid (token_window.py says how). Nothing else needs steering: suspending,
renaming or resuming the account under test only affects the tenant API, and the run's own operator
token cannot be revoked through this API.
"""

import os
import sys

import schemathesis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from token_window import keep_token_condition_valid, keep_token_window_valid  # noqa: E402


@schemathesis.hook
def before_call(context, case, kwargs):
    if case.operation.method.lower() == "post" and case.operation.path.endswith("/tokens"):
        keep_token_window_valid(case.body)
        keep_token_condition_valid(case.body)
