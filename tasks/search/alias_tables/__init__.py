"""Data: the alias tables of Search-v2's scorer (``aliases.json``, built from ``curated.json``)."""
