"""HTTPS client run inside the container's network namespace (by the host's python3).

python3 probe.py METHOD URL CA_FILE [BODY_FILE]  ->  {"status": int, "body": str} on stdout
"""

import json
import ssl
import sys
import urllib.error
import urllib.request


def main(method: str, url: str, ca_file: str, body_file: str | None = None) -> None:
    data = open(body_file, "rb").read() if body_file else None  # noqa: SIM115
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    context = ssl.create_default_context(cafile=ca_file)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    print(json.dumps({"status": status, "body": body.decode(errors="replace")}))


if __name__ == "__main__":
    main(*sys.argv[1:])
