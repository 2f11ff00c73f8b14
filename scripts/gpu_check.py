#!/usr/bin/env python
"""The GPU check, as `python -m lexrag.cli.gpu_check` runs it (it ships in the wheel, so a Kaggle cell
can run it too): every GPU path of lexrag with tiny random-weight models, in minutes.

  python scripts/gpu_check.py             # on a CUDA machine: every check on the GPUs
  python scripts/gpu_check.py --cpu       # the reduced CPU mode the test suite runs
  python scripts/gpu_check.py --json out.json
"""

import sys

from lexrag.cli.gpu_check import main

if __name__ == "__main__":
    sys.exit(main())
