"""``python -m engine.bench``: run the benchmark (see ``engine.bench``)."""

from engine.bench.runner import main

raise SystemExit(main())
