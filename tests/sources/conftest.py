from tests.runtime.conftest import argo, config, env, kube, logs_at_debug, policy_file, slack

__all__ = ["argo", "config", "env", "kube", "logs_at_debug", "policy_file", "slack"]
