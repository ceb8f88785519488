from __future__ import annotations

from eosfix.cli import main

raise SystemExit(main())
