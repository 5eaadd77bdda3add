"""``python -m kubesched.testing.controlplane``."""

import sys

from kubesched.testing.controlplane.cli import main

sys.exit(main())
