"""Problem files and custom implementations (arrive with the problem-suite and kernels issues)."""
