from llmq.cli import main

raise SystemExit(main())
