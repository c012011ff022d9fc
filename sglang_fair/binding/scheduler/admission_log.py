"""``AdmissionLog``: a rank's admission count and digest, logged once idle after admitting.

The tensor-parallel ranks of a worker run the same policy on the same events,
so they must admit the same requests: each logs how many it admitted and
their digest (``FairScheduler.admission_digest``) when it falls idle
(``charging.refresh_when_idle``), and the lines of a worker's ranks must match.
"""

from __future__ import annotations

import logging

from sglang_fair.core.fair_scheduler import FairScheduler

logger = logging.getLogger(__name__)


class AdmissionLog:
    def __init__(self) -> None:
        self.logged = 0  # the admission count the last line reported

    def log_if_changed(self, fair: FairScheduler, decode_turns: int | None = None) -> None:
        """Log the count and digest if the rank admitted since the last line, and latency isolation's
        decode turns so far (``decode_turns``, None without isolation)."""
        admissions = fair.admissions
        if admissions != self.logged:
            self.logged = admissions
            turns = "" if decode_turns is None else f", {decode_turns} decode turns"
            logger.info("sglang-fair: %d admissions, digest %s%s", admissions, fair.admission_digest(), turns)
