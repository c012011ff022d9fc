"""--fair-policy-config is read and checked whatever policy runs."""

from __future__ import annotations

import pytest

from sglang_fair.core.options import FairOptions, OptionError
from sglang_fair.core.policies import check_policy_config


def test_a_valid_file_passes_for_a_policy_without_a_section(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("fairserve:\n  alpha: 2\njustitia:\n  min_samples: 3\n")
    check_policy_config(FairOptions(policy="dlpm", policy_config=str(path)))
    check_policy_config(FairOptions(policy="dlpm"))  # no file: nothing to check


@pytest.mark.parametrize("config, message", [
    ({"fairsrve": {"alpha": 2}}, "unknown sections ['fairsrve']"),
    ({"fairserve": {"alpah": 2}}, "unknown keys in 'fairserve'"),
    ({"fairserve": {"overload_kv_usage": 3}}, "overload_kv_usage"),
    ({"justitia": "yes"}, "section 'justitia' must be a mapping"),
    ("/nonexistent/policies.yaml", "cannot read /nonexistent/policies.yaml"),
])
def test_mistakes_in_any_section_are_named(config, message):
    with pytest.raises(OptionError) as exc:
        check_policy_config(FairOptions(policy="vtc", policy_config=config))
    assert message in str(exc.value)
