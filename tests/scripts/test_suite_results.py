"""suite_results: reading cases, step times, incomplete files, matching."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from scripts.results import suite_results as sr
from synthetic_results import group_attrs, ring_cases, sp_tp_cases


def test_reads_cases_params_and_attrs(results_writer):
    path = results_writer("run.h5", "sp_tp", sp_tp_cases())
    res = sr.read_results(path)
    assert res.complete
    assert res.benches() == ["sp_tp"]
    assert len(res.cases) == 8
    case = res.cases["sp_tp/allreduce_fp32_n1024"]
    assert case.params == {"op": "allreduce", "dtype": "fp32", "n_bytes": 1024}
    assert isinstance(case.params["n_bytes"], int) and isinstance(case.params["op"], str)
    assert case.check_passed == 1
    assert case.attrs["iterations"] == 20
    assert res.attrs["world_size"] == 4 and res.attrs["backend"] == "cpu"
    assert res.ranks["hostname"] == ["node01", "node01", "node02", "node02"]
    assert case.datasets["bytes_sent"].tolist() == [1536] * 4
    assert case.predictions() == {"bytes_sent_per_rank": (1536.0, 1536.0)}
    # natural order: n1024 < n16384 < n262144 < n4194304, not string order
    assert [c.name for c in res.cases_of("sp_tp")][:4] == [
        "allreduce_fp32_n1024", "allreduce_fp32_n16384", "allreduce_fp32_n262144",
        "allreduce_fp32_n4194304"]


def test_step_times_are_max_over_ranks(results_writer):
    cases = sp_tp_cases(straggler_case="rs_ag_fp32_n16384")
    path = results_writer("run.h5", "sp_tp", cases)
    case = sr.read_results(path).cases["sp_tp/rs_ag_fp32_n16384"]
    time_s = case.datasets["time_s"]
    assert time_s.shape == (20, 4)
    step = case.step_times()
    np.testing.assert_array_equal(step, time_s.max(axis=1))
    assert not np.allclose(step, time_s.mean(axis=1))  # the straggler makes max != mean
    assert case.median_s == pytest.approx(np.median(step))


def test_step_times_rejects_bad_shape():
    with pytest.raises(ValueError):
        sr.step_times(np.zeros((2, 3, 4)))


def test_median_falls_back_to_time_s(results_writer):
    path = results_writer("run.h5", "sp_tp", sp_tp_cases()[:1])
    case = sr.read_results(path).cases["sp_tp/allreduce_fp32_n1024"]
    expected = float(np.median(case.step_times()))
    del case.attrs["time_median_s"]
    assert case.median_s == pytest.approx(expected)


def test_complete_file_gives_no_warning(results_writer):
    path = results_writer("run.h5", "sp_tp", sp_tp_cases())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sr.read_results(path)


def test_partial_file_is_read_with_warning(results_writer):
    path = results_writer("run.h5", "sp_tp", sp_tp_cases()[:3], partial=True)
    assert path.name == "run.h5.partial"
    with pytest.warns(sr.IncompleteResultsWarning, match="not complete"):
        res = sr.read_results(path)
    assert not res.complete
    assert len(res.cases) == 3
    assert res.cases["sp_tp/allreduce_fp32_n1024"].step_times().shape == (20,)


def test_final_name_with_complete_zero_warns(results_writer):
    path = results_writer("run.h5", "sp_tp", sp_tp_cases()[:1], file_attrs={"complete": 0})
    with pytest.warns(sr.IncompleteResultsWarning, match="complete = 0"):
        assert not sr.read_results(path).complete


def test_unknown_schema_version_warns(results_writer):
    path = results_writer("run.h5", "sp_tp", sp_tp_cases()[:1], file_attrs={"schema_version": 2})
    with pytest.warns(sr.SchemaWarning, match="schema_version 2"):
        sr.read_results(path)


def test_fixed_length_strings_decode_to_str(results_writer):
    path = results_writer("run.h5", "sp_tp", sp_tp_cases()[:1], fixed_strings=True)
    res = sr.read_results(path)
    assert res.attrs["backend"] == "cpu" and isinstance(res.attrs["backend"], str)
    assert res.ranks["hostname"][0] == "node01"
    assert res.cases["sp_tp/allreduce_fp32_n1024"].params["op"] == "allreduce"


def test_attributes_only(results_writer):
    path = results_writer("run.h5", "sp_tp", sp_tp_cases())
    case = sr.read_results(path, load_datasets=False).cases["sp_tp/rs_ag_fp32_n1024"]
    assert case.datasets == {}
    assert case.median_s is not None
    with pytest.raises(KeyError):
        case.step_times()


def test_match_cases_and_config(results_writer):
    a = sr.read_results(results_writer("a.h5", "sp_tp", sp_tp_cases()[:5]))
    b = sr.read_results(results_writer("b.h5", "sp_tp", sp_tp_cases()[2:],
                                       file_attrs={"link": "nvlink"}))
    pairs, only_a, only_b, differing = sr.match_cases(a, b)
    assert differing == []
    assert [x.key for x, _ in pairs] == [
        "sp_tp/allreduce_fp32_n262144", "sp_tp/allreduce_fp32_n4194304",
        "sp_tp/rs_ag_fp32_n1024"]
    assert all(x.key == y.key for x, y in pairs)
    assert only_a == ["sp_tp/allreduce_fp32_n1024", "sp_tp/allreduce_fp32_n16384"]
    assert len(only_b) == 3
    assert sr.config_differences(a, b) == ["link: 'loopback' != 'nvlink'"]


def test_created_and_stem(results_writer):
    path = results_writer("x.h5", "sp_tp", sp_tp_cases()[:1], partial=True,
                          created_utc="2025-03-01T12:30:00Z")
    with pytest.warns(sr.IncompleteResultsWarning):
        res = sr.read_results(path)
    assert res.created.isoformat() == "2025-03-01T12:30:00+00:00"
    assert sr.file_stem(path) == "x"


def test_describe_flags_an_oversubscribed_run(results_writer):
    plain = sr.read_results(results_writer("a.h5", "sp_tp", sp_tp_cases()[:1]))
    assert "oversubscribed" not in plain.describe()
    over = sr.read_results(results_writer(
        "b.h5", "sp_tp", sp_tp_cases()[:1],
        file_attrs={"oversubscribed": 1, "ranks_per_host_max": 4, "cpu_threads_per_host_min": 2}))
    assert over.describe().endswith("| oversubscribed: 4 ranks on 2 CPU threads")


def test_same_name_other_params_do_not_match(results_writer):
    a = sr.read_results(results_writer("a.h5", "ring_attention", ring_cases(1), world_size=2))
    b = sr.read_results(results_writer("b.h5", "ring_attention",
                                       ring_cases(2, extra_params={"attn_kernel_choice": "auto"}),
                                       world_size=2))
    match = sr.match_cases(a, b)
    assert match.pairs == [] and match.only_base == [] and match.only_cand == []
    assert [x.key for x, _, _ in match.differing] == [
        "ring_attention/ring_contiguous_causal_fp32_c1024_a8_d64",
        "ring_attention/ring_contiguous_causal_fp32_c4096_a8_d64"]
    assert match.differing[0][2] == ["s: 1024 != 2048", "n_c: 1 != 2", "cp_groups: 2 != 1",
                                     "attn_kernel_choice: (absent) != 'auto'"]
    loose = sr.match_cases(a, b, ignore_params=("s", "n_c", "cp_groups", "attn_kernel_choice"))
    assert len(loose.pairs) == 2 and loose.differing == []
    assert len(sr.match_cases(a, a).pairs) == 2


def test_group_is_part_of_the_config_and_older_files_have_one_group(results_writer):
    old = sr.read_results(results_writer("old.h5", "ring_attention", ring_cases(4, 4)))
    assert "group_size" not in old.attrs
    assert old.config()["group_size"] == 4 and old.config()["group_count"] == 1
    whole = sr.read_results(results_writer("whole.h5", "ring_attention", ring_cases(4, 4),
                                           file_attrs=group_attrs(4, 4)))
    assert sr.config_differences(old, whole) == []
    halves = sr.read_results(results_writer("halves.h5", "ring_attention", ring_cases(2, 4),
                                            file_attrs=group_attrs(2, 4)))
    assert sr.config_differences(old, halves) == ["group_size: 4 != 2", "group_count: 1 != 2"]
    assert old.bench == "ring_attention"
