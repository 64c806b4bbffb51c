from tests.executors.conftest import argo, token_file

__all__ = ["argo", "token_file"]
