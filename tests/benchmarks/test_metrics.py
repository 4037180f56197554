"""benchmarks.metrics against values computed by hand."""

import pytest

from benchmarks import metrics as M


def test_correlations_hand_computed():
    # x = 1,2,3,4 ; y = 1,3,2,4: deviations give cov 4, variances 5 and 5 -> r = 0.8.
    # Ranks equal the values -> Spearman 0.8. Pairs: 5 concordant, 1 discordant -> tau = 4/6.
    c = M.correlations([1, 2, 3, 4], [1, 3, 2, 4])
    assert c["pearson"] == pytest.approx(0.8)
    assert c["spearman"] == pytest.approx(0.8)
    assert c["kendall"] == pytest.approx(4 / 6)
    assert (c["n"], c["dropped"]) == (4, 0)


def test_correlations_drop_failures_and_constant_input():
    c = M.correlations([None, 1, 2, 3, None], [5, 1, 2, 3, 1])
    assert (c["n"], c["dropped"]) == (3, 2)
    assert c["pearson"] == pytest.approx(1.0)
    assert M.correlations([3, 3, 3], [1, 2, 3])["pearson"] is None
    with pytest.raises(ValueError, match="one per item"):
        M.correlations([1, 2], [1])


def test_kendall_with_ties_is_tau_b():
    # x = 1,1,2 ; y = 1,2,3: pairs (1,2) tied in x, (1,3) and (2,3) concordant -> C=2, D=0,
    # tau_b = 2 / sqrt((3-1)*(3-0)) = 2/sqrt(6)
    assert M.correlations([1, 1, 2], [1, 2, 3])["kendall"] == pytest.approx(2 / 6**0.5)


@pytest.mark.parametrize(
    "labels, preds, with_tie, expected",
    [
        (["A", "B", "A", "B"], ["A", "B", "B", None], False, 0.5),  # failure counts wrong
        (["A", "tie", "B"], ["A", "A", "B"], False, 1.0),  # tie pair left out
        (["A", "tie", "B"], ["A", "A", "B"], True, 2 / 3),  # tie pair needs a tie call
        (["A", "tie", "tie", "B"], ["A", "tie", None, "tie"], True, 0.5),  # predicted tie on A/B is wrong
        (["tie"], ["tie"], False, None),  # nothing left to score
    ],
)
def test_pairwise_accuracy_table(labels, preds, with_tie, expected):
    got = M.pairwise_accuracy(labels, preds, with_tie=with_tie)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_pairwise_accuracy_rejects_bad_labels():
    with pytest.raises(ValueError, match="'A', 'B' or 'tie'"):
        M.pairwise_accuracy(["1"], ["A"], with_tie=True)


def test_krippendorff_alpha_hand_computed():
    # Two raters, items (1,1), (2,2), (3,4) at interval level. Pairable values 1,1,2,2,3,4 (n=6).
    # Observed: only item 3 disagrees: 2 ordered pairs * (3-4)^2 / (m_u - 1 = 1) -> D_o = 2/6.
    # Expected: value counts n1=2, n2=2, n3=1, n4=1; sum over ordered value pairs n_c n_k (c-k)^2
    # = 2 * (4 + 8 + 18 + 2 + 8 + 1) = 82, over n(n-1) = 30 -> D_e = 82/30.
    # alpha = 1 - D_o / D_e = 1 - (2/6)/(82/30) = 1 - 10/82
    a = M.krippendorff_alpha([[1, 2, 3], [1, 2, 4]], level="interval")
    assert a == pytest.approx(1 - 10 / 82)


def test_krippendorff_alpha_perfect_missing_and_undefined():
    assert M.krippendorff_alpha([[1, 2, None], [1, 2, 5]]) == pytest.approx(1.0)
    assert M.krippendorff_alpha([[3, 3], [3, 3]]) is None  # no variation: undefined
    assert M.krippendorff_alpha([[1, 2, 3]]) is None  # one rater


def test_transitivity_counts_only_complete_triples():
    v = {
        ("a", "b"): "A",
        ("b", "c"): "A",
        ("a", "c"): "A",  # a>b>c, a>c: transitive
        ("c", "d"): "A",
        ("b", "d"): None,
        ("a", "d"): "B",
    }  # b-d undecided
    t = M.transitivity(v)
    # triples: abc (complete, ok), abd (b-d missing), acd (a>c, c>d, d>a: cycle), bcd (missing)
    assert t == {"rate": 0.5, "triples": 2}


def test_swap_consistency_and_failure_rate():
    assert M.swap_consistency([("A", "A"), ("B", "A"), ("B", "B"), ("A", None)]) == {"rate": 2 / 3, "n": 3}
    assert M.swap_consistency([]) == {"rate": None, "n": 0}
    assert M.failure_rate(3, 12) == 0.25 and M.failure_rate(0, 0) is None


def test_confusion_and_exact_accuracy():
    m = M.confusion_matrix([1, 2.4, 4.6, None, 5], [1, 2, 5, 3, 4])
    assert m[0][0] == 1 and m[1][1] == 1 and m[4][4] == 1 and m[3][4] == 1
    assert sum(map(sum, m)) == 4
    assert M.exact_accuracy([1, 2.4, 4.6, None], [1, 2, 4, 3]) == 0.5


def test_calibration_bins():
    bins = M.calibration([1.0, 2.9, 3.0, 5.0, None], [1, 3, 4, 5, 2], bins=2)
    assert [b["n"] for b in bins] == [2, 2]
    assert bins[0]["expected"] == pytest.approx(1.95) and bins[0]["reference"] == pytest.approx(2.0)
    assert bins[1]["expected"] == pytest.approx(4.0) and bins[1]["reference"] == pytest.approx(4.5)


def test_by_group():
    assert M.by_group(["b", "a", "b"], lambda x, y: sum(x) - sum(y), [1, 2, 3], [0, 1, 1]) == {"a": 1, "b": 3}
