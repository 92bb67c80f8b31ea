"""What the SDK flows share: a step that fails says what it expected, and the runner that runs the
steps in order, stops at the first failure with the HTTP exchange behind it, and always cleans up."""

from __future__ import annotations

import sys
import traceback
from typing import Callable

import cloudflare


class StepFailed(Exception):
    pass


def expect(cond: bool, what: str, got: object = None) -> None:
    if not cond:
        raise StepFailed(f"expected {what}; got {got!r}")


def failure(name: str, base_url: str) -> str:
    """What went wrong in step `name`, from the exception being handled."""
    try:
        raise
    except StepFailed as e:
        return f"{name}: {e}"
    except cloudflare.APIStatusError as e:
        return (f"{name}: HTTP {e.status_code} {e.response.request.method} "
                f"{e.response.request.url}\n  response body: {e.response.text}")
    except cloudflare.APIResponseValidationError as e:
        return (f"{name}: the SDK could not read the answer (HTTP {e.response.status_code} "
                f"{e.response.request.method} {e.response.request.url})\n"
                f"  response body: {e.response.text}\n  {e}")
    except cloudflare.APIConnectionError as e:
        return f"{name}: connection error to {base_url}: {e!r}"
    except Exception:  # noqa: BLE001 - anything else fails the step, with its trace
        return f"{name}: unexpected exception\n{traceback.format_exc()}"


def run_steps(title: str, steps: list[Callable[[], None]], base_url: str,
              clean_up: Callable[[bool], None]) -> int:
    """Runs `steps` in order; `clean_up(failed)` runs last, whatever happened. Prints
    "<title>: N passed, F failed" and returns the exit status."""
    passed: list[str] = []
    failed: str | None = None
    try:
        for step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - described by failure()
                failed = failure(step.__name__, base_url)
                break
            passed.append(step.__name__)
            print(f"ok   {step.__name__}")
    finally:
        try:
            clean_up(failed is not None)
        except Exception:  # noqa: BLE001 - best-effort cleanup
            pass
    if failed:
        print(f"FAIL {failed}", file=sys.stderr)
        print(f"{title}: {len(passed)} passed, 1 failed")
        return 1
    print(f"{title}: {len(passed)} passed, 0 failed")
    return 0
