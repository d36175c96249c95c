"""Children lead their own process group but stay in our session (and autogroup)."""

from __future__ import annotations

import os
import subprocess
import sys

from eagle_eye.children import own_process_group


def test_a_child_leads_its_own_group_in_our_session() -> None:
    probe = "import os; print(os.getpid(), os.getpgrp(), os.getsid(0))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
        **own_process_group(),
    ).stdout.split()
    child_pid, child_pgid, child_sid = (int(x) for x in out)
    assert child_pgid == child_pid != os.getpgrp()  # killpg on it cannot reach us
    assert child_sid == os.getsid(0)  # same session: same scheduler autogroup
