"""The `kubernetes` client's request plumbing that informer.KubeApi calls below the models."""

from __future__ import annotations

import inspect

import pytest
from canary.canary_support import Internal, rows, takes, verify


def _unloaded_response() -> None:
    """Responses are not read up front: a watch streams `RESTResponse.response`."""
    from kubernetes.client import rest

    assert "preload_content=False" in inspect.getsource(rest.RESTClientObject.request)
    fields = inspect.getsource(rest.RESTResponse.__init__)
    assert "self.response = resp" in fields and "self.status" in fields, fields
    assert callable(rest.RESTResponse.read)


def _pool_settings() -> None:
    from kubernetes import client

    configuration = client.Configuration()
    assert hasattr(configuration, "retries"), "Configuration has no retries"
    assert isinstance(configuration.connection_pool_maxsize, int)


API_CLIENT = "kubernetes.client.ApiClient"
INTERNALS = [
    Internal(
        "kubernetes",
        f"{API_CLIENT}.param_serialize",
        takes(
            f"{API_CLIENT}.param_serialize",
            "self",
            "method",
            "resource_path",
            "path_params",
            "query_params",
            "header_params",
            "body",
            "post_params",
            "files",
            "auth_settings",
        ),
    ),
    Internal(
        "kubernetes",
        f"{API_CLIENT}.call_api",
        takes(
            f"{API_CLIENT}.call_api",
            "self",
            "method",
            "url",
            "header_params",
            "body",
            "post_params",
            "_request_timeout",
        ),
    ),
    Internal("kubernetes", "kubernetes.client.rest.RESTResponse.response", _unloaded_response),
    Internal(
        "kubernetes",
        "kubernetes.client.Configuration.retries, connection_pool_maxsize",
        _pool_settings,
    ),
]


@pytest.mark.parametrize("internal", rows(INTERNALS))
def test_kubernetes_internal_still_there(internal: Internal) -> None:
    verify(internal)
