"""remediator: self-healing for LLM inference on Kubernetes."""

__version__ = "0.1.0"
