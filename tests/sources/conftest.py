from tests.runtime.conftest import argo, config, env, kube, policy_file, slack

__all__ = ["argo", "config", "env", "kube", "policy_file", "slack"]
