"""Pure pieces: warning and audit bounds, denial messages, durations, policy reload, TLS cache."""

from __future__ import annotations

import contextlib
import ssl
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from admission.admission_support import POLICIES, StaticLoader

from webhook import certificates
from webhook.admission import review, tls
from webhook.admission.config import TlsFiles
from webhook.admission.deadline import budget, parse_go_duration
from webhook.admission.reload import PolicyHolder
from webhook.admission.tls import ContextCache
from webhook.types import FactsUnavailable, PolicySet, Reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("short", "short"),
        ("x" * 120, "x" * 120),
        ("x" * 121, "x" * 119 + "…"),
        ("é" * 300, "é" * 119 + "…"),
        ("line\nbreak\ttab", "line break tab"),
        ("\n\n", None),
    ],
    ids=["short", "exactly-120", "121", "non-ascii", "control-chars", "blank-dropped"],
)
def test_warnings_are_one_line_and_at_most_120(text: str, expected: str | None) -> None:
    assert review.bound_warnings([text]) == ([expected] if expected else [])


FEASIBILITY = (
    "dragate: request 'gpu' needs 2 gpu.nvidia.com devices, 0 in the cluster match; selector "
    '\'device.attributes["gpu.nvidia.com"].productName == "H200"\' rules out the most '
    "(without it: NVIDIA H100 80GB HBM3 x8) (feasibility)"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            FEASIBILITY,
            "dragate: request 'gpu' needs 2 gpu.nvidia.com devices, 0 in the cluster match; …",
        ),
        ("word " * 30, ("word " * 23).rstrip() + " …"),
    ],
    ids=["at-a-clause", "at-a-word"],
)
def test_a_long_warning_is_cut_between_clauses_or_words_never_mid_word(
    text: str, expected: str
) -> None:
    (cut,) = review.bound_warnings([text])
    assert cut == expected and len(cut) <= 120


def test_printable_text_holds_nothing_the_control_pattern_replaces() -> None:
    """`_one_line` skips the pattern for printable text: every code point it matches must be
    unprintable, in this Python's Unicode tables too."""
    matched = (chr(c) for c in range(0x110000) if review._CONTROL_CHARS.match(chr(c)))
    assert not [c for c in matched if c.isprintable()]


def test_warning_count_is_bounded() -> None:
    bounded = review.bound_warnings([f"w{i}" for i in range(50)], limit=20)
    assert len(bounded) == 20 and bounded[-1] == "31 more warnings not shown"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("tenant", "tenant"),
        ("dragate.io/tenant", "dragate.io-tenant"),
        ("-lead_", "lead"),
        ("a" * 80, "a" * 63),
        ("über key", "ber-key"),
        ("///", ""),
    ],
    ids=["plain", "slash", "edge-chars", "long", "non-ascii", "nothing-left"],
)
def test_audit_keys_become_valid_qualified_names(key: str, expected: str) -> None:
    assert review.audit_key(key) == expected


def test_audit_annotations_first_key_wins_and_values_bounded() -> None:
    got = review.audit_annotations({"a/b": "1", "a-b": "2", "v": "x" * 5000})
    assert got["a-b"] == "1" and len(got["v"]) == review.MAX_AUDIT_VALUE_CHARS


def test_reason_numbers_are_not_repeated_when_the_message_has_them() -> None:
    reason = Reason(
        "quota",
        "team-a uses 6 of 8 gpu.nvidia.com",
        tenant="team-a",
        device_class="gpu.nvidia.com",
        used=6,
        limit=8,
        requested=4,
    )
    text = review.format_reason(reason)
    assert text.count("team-a") == 1 and text.count("gpu.nvidia.com") == 1
    assert "used 6 / limit 8 / requested 4" in text


def test_denial_message_is_bounded() -> None:
    message = review.denial_message([Reason("p", f"m{i}") for i in range(15)])
    assert message.endswith("and 5 more reasons")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10s", 10.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("", None),
        ("10", None),
        ("s", None),
        ("-1s", None),
        ("0s", None),
        ("10x", None),
    ],
)
def test_go_durations(text: str, seconds: float | None) -> None:
    assert parse_go_duration(text) == seconds


def test_budget_keeps_a_margin_and_caps_at_30s() -> None:
    assert budget("10s", 10.0, 0.25) == 9.75
    assert budget("1s", 10.0, 0.5) == 0.75
    assert budget(None, 10.0, 0.25) == 9.75
    assert budget("5m", 10.0, 0.25) == 29.75
    assert budget("junk", 3.0, 0.25) == 2.75


# --------------------------------------------------------------------------- reload


def test_reload_swaps_a_valid_set_and_keeps_the_last_good_one(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("one")
    loader = StaticLoader(POLICIES)
    holder = PolicyHolder([str(tmp_path)], loader)
    assert not holder.poll()  # nothing changed
    policy.touch()
    assert not holder.poll()  # touched, same content: not reloaded

    loader.result = PolicySet(digest="d2")
    policy.write_text("two")
    assert holder.poll() and holder.get().digest == "d2" and not holder.status.stale

    error = ValueError("bad")
    error.problems = ["p.yaml:3: spec.quota: expected a list"]  # type: ignore[attr-defined]
    loader.result = error
    policy.write_text("three")
    assert not holder.poll()
    assert holder.get().digest == "d2"
    assert holder.status.stale and holder.status.errors == (
        "p.yaml:3: spec.quota: expected a list",
    )

    loader.result = PolicySet(digest="d4")
    policy.write_text("four")
    assert holder.poll() and holder.get().digest == "d4" and not holder.status.stale


class ObjectsLoader:
    """Loads the files and the 'objects' as a cluster feed would: unavailable until listed."""

    def __init__(self) -> None:
        self.listed: list[str] | None = None

    def __call__(self, paths: Sequence[str]) -> PolicySet:
        if self.listed is None:
            raise FactsUnavailable("Tenant objects not listed yet")
        return PolicySet(digest="+".join(self.listed) or "none")

    def changes(self) -> object:
        return None if self.listed is None else tuple(self.listed)


def test_policy_objects_are_reloaded_when_they_change_and_none_is_served_before() -> None:
    feed = ObjectsLoader()
    holder = PolicyHolder([], feed, changes=feed.changes)
    assert holder.loaded is None and holder.status.errors == ("Tenant objects not listed yet",)
    with pytest.raises(FactsUnavailable, match="policies not loaded yet: Tenant objects"):
        holder.get()
    assert not holder.poll()  # still not listed: tried again, nothing to serve
    feed.listed = []
    assert holder.poll() and holder.get().digest == "none" and not holder.status.stale
    assert not holder.poll()  # nothing changed
    feed.listed = ["a"]
    assert holder.poll() and holder.get().digest == "a"


def test_objects_unlisted_at_boot_are_not_replaced_by_the_files_alone() -> None:
    feed = ObjectsLoader()
    holder = PolicyHolder([], feed, fallback=PolicySet(digest="files"), changes=feed.changes)
    assert holder.loaded is None


def test_watcher_thread_polls(tmp_path: Path) -> None:
    from webhook.admission.reload import PolicyWatcher

    (tmp_path / "p.yaml").write_text("one")
    loader = StaticLoader(POLICIES)
    holder = PolicyHolder([str(tmp_path)], loader)
    watcher = PolicyWatcher(holder, interval=0.05)
    watcher.ensure_running()
    watcher.ensure_running()  # once per process
    loader.result = PolicySet(digest="new")
    (tmp_path / "p.yaml").write_text("two")
    deadline = time.monotonic() + 3
    while holder.get().digest != "new" and time.monotonic() < deadline:
        time.sleep(0.02)
    watcher.stop()
    assert holder.get().digest == "new"


def test_a_directory_removed_while_walked_is_empty_not_a_crash(tmp_path: Path) -> None:
    """A worker booting while the policy directory is deleted must not die (gunicorn would
    stop the whole server): the walk sees no files and the loader reports the problem."""
    import shutil
    import threading

    from webhook.admission.reload import content_digest, fingerprint

    root, done = tmp_path / "policies", threading.Event()

    def churn() -> None:
        while not done.is_set():
            for n in range(20):
                (root / f"d{n}" / "e").mkdir(parents=True, exist_ok=True)
                (root / f"d{n}" / "e" / "p.yaml").write_text("x")
            shutil.rmtree(root, ignore_errors=True)

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        for _ in range(300):
            assert isinstance(fingerprint([str(root)]), tuple)
            assert isinstance(content_digest([str(root)]), str)
    finally:
        done.set()
        thread.join()
    shutil.rmtree(root, ignore_errors=True)
    gone = [str(tmp_path / "never-made")]
    assert fingerprint([str(root)]) == fingerprint(gone) == ()
    assert content_digest([str(root)]) == content_digest(gone)


# --------------------------------------------------------------------------- TLS


def _serial(context: ssl.SSLContext, ca: Path) -> int:
    """The serial of the certificate `context` serves, via an in-memory handshake."""
    from cryptography import x509

    client = ssl.create_default_context(cafile=str(ca))
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    cli = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    srv = context.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (cli, srv):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    der = cli.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_context_is_cached_and_reloaded_on_change(tmp_path: Path) -> None:
    certificates.create(tmp_path, ["localhost"])
    files = TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key")
    cache = ContextCache(files)
    first = cache.get()
    assert cache.get() is first
    assert first.minimum_version == ssl.TLSVersion.TLSv1_2
    assert first.options & ssl.OP_NO_RENEGOTIATION
    certificates.renew(tmp_path)
    second = cache.get()
    assert second is not first
    renewed = certificates.read_certs(files.cert)[0]
    assert _serial(second, tmp_path / "ca.crt") == renewed.serial_number


def test_mismatched_pair_keeps_the_previous_context(tmp_path: Path) -> None:
    certificates.create(tmp_path, ["localhost"])
    cache = ContextCache(TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key"))
    first = cache.get()
    ca, ca_key = certificates.read_ca(certificates.CertDir(tmp_path))
    _, other_key = certificates.make_serving(ca, ca_key, ["localhost"])
    certificates.write_file(tmp_path / "tls.key", certificates.pem_key(other_key), private=True)
    assert cache.get() is first  # mid-swap: new key, old certificate
    (tmp_path / "tls.key").unlink()
    assert cache.get() is first  # briefly missing


def test_client_ca_verifies_client_certificates(tmp_path: Path) -> None:
    """Optional in the handshake (probes carry none), verified when presented; the review
    routes require one (tests/admission/test_admission_server.py)."""
    certificates.create(tmp_path, ["localhost"])
    files = TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "ca.crt")
    assert ContextCache(files).get().verify_mode == ssl.CERT_OPTIONAL
    no_ca = TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert ContextCache(no_ca).get().verify_mode == ssl.CERT_NONE


def _another_key(key_pem: bytes) -> bytes:
    """A well-formed key of the same curve that the certificate does not name."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    key = load_pem_private_key(key_pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return certificates.pem_key(ec.generate_private_key(key.curve))


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda good: good[: len(good) // 2], id="half-written"),
        pytest.param(_another_key, id="another-key"),
        pytest.param(lambda good: b"", id="empty"),
    ],
)
def test_a_key_that_cannot_sign_for_the_certificate_is_never_served(
    tmp_path: Path, broken: Any
) -> None:
    certificates.create(tmp_path, ["localhost"])
    cert, key = (tmp_path / "tls.crt").read_bytes(), (tmp_path / "tls.key").read_bytes()
    tls.prove_pair(cert, key)
    with pytest.raises(ValueError, match="key"):
        tls.prove_pair(cert, broken(key))
    cache = ContextCache(TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key"))
    first = cache.get()
    certificates.write_file(tmp_path / "tls.key", broken(key), private=True)
    assert cache.get() is first
    certificates.write_file(tmp_path / "tls.key", key, private=True)
    assert cache.get() is not first  # the good pair again: loaded


def test_tls12_offers_only_ecdhe_with_aead(tmp_path: Path) -> None:
    certificates.create(tmp_path, ["localhost"])
    context = ContextCache(TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key")).get()
    tls12 = [c for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 and all(c["aead"] and c["kea"] == "kx-ecdhe" for c in tls12), tls12


def test_every_handshake_gets_the_current_certificate(tmp_path: Path) -> None:
    """The hook's context switches each connection to the cache's current one (SNI callback,
    called with and without a server name)."""
    certificates.create(tmp_path, ["localhost"])
    files = TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key")
    first = tls.gunicorn_hook(files)(object(), ssl.create_default_context)
    before = _serial(first, tmp_path / "ca.crt")
    certificates.renew(tmp_path)
    renewed = certificates.read_certs(files.cert)[0].serial_number
    assert before != renewed
    assert _serial(first, tmp_path / "ca.crt") == renewed
