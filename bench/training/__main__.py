"""``python -m bench.training``: run the benchmark (see ``bench.training``)."""

from bench.training.runner import main

raise SystemExit(main())
