from swafloor.cli import main

raise SystemExit(main())
