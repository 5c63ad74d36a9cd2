"""S004's memory eval suites (`memsys eval`): freshness, leakage, precision/recall,
staleness, red team. Each returns figures, each figure its S004 threshold; probes that need
data of their own write it in a transaction that is rolled back, so an eval never changes
the store it measures."""
