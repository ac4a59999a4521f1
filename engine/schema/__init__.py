"""What a run may say, torch-free: the run config and system spec, every trainer setting (catalog,
rules, the CoMLRL config classes derived from it), the algorithm table, errors, pre-flight checks,
model sources, size budgets and the run-folder layout. The only part of the engine the app imports."""
