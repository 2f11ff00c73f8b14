from lexrag.cli import main

raise SystemExit(main())
