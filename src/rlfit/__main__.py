from rlfit.cli import main

raise SystemExit(main())
