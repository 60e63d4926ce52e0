from tasks.data_analysis.audit import tier_counts
from tasks.data_analysis.tiers import TEMPLATES


def test_tier_counts_cover_every_tier_and_keep_most_drafts():
    counts = tier_counts(drafts=4, seed=1)
    assert sorted(counts) == [1, 2, 3, 4]
    assert sum(c["templates"] for c in counts.values()) == len(TEMPLATES)
    for c in counts.values():
        assert c["tables"] >= 2 and c["parameterisations"] >= c["templates"]
        assert 0.5 <= c["keep_rate"] <= 1.0
