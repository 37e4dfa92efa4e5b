"""Runs the image's root filesystem the way the chart's pod runs it, without a container engine.

`unshare --mount --pid [--net] --fork` gives the pod its namespaces (the server is PID 1);
a host shell then does what the kubelet and runc do, and `exec`s into the image:

- the root filesystem is bind-mounted read-only (readOnlyRootFilesystem: true);
- `/proc` and a small `/dev` with the usual device nodes;
- every emptyDir of the Deployment is a tmpfs (medium: Memory) at its mountPath;
- the TLS Secret is a read-only tmpfs with files mode 0440, group = fsGroup (65532);
- the policy ConfigMap is a read-only bind mount of a ConfigMap-shaped directory (`..data`);
- `env -i` + the image config's Env + the container's env, then `chroot --userspec` as
  runAsUser:runAsGroup with fsGroup as supplementary group, running `command` + `args`
  (`$(VAR)` expanded like the kubelet, `command[0]` looked up on the image's PATH).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
FIELD_VALUES = {
    "metadata.namespace": "dragate-system",
    "metadata.name": "dragate-image-test",
    "spec.serviceAccountName": "dragate",
}


@dataclass(frozen=True)
class ImageConfig:
    """What the runtime takes from the OCI config: user, entrypoint, cmd, env."""

    user: str
    entrypoint: list[str]
    cmd: list[str]
    env: dict[str, str]

    @classmethod
    def read(cls, layout: Path) -> ImageConfig:
        index = json.loads((layout / "index.json").read_text())
        manifest = _blob(layout, index["manifests"][0]["digest"])
        config = _blob(layout, manifest["config"]["digest"])["config"]
        env = dict(item.split("=", 1) for item in config.get("Env", []))
        return cls(config["User"], config["Entrypoint"], config.get("Cmd", []), env)


def _blob(layout: Path, digest: str) -> Any:
    return json.loads((layout / "blobs/sha256" / digest.removeprefix("sha256:")).read_text())


@dataclass(frozen=True)
class PodSpec:
    """The parts of the rendered Deployment's pod that decide how the process runs."""

    container: dict[str, Any]
    volumes: dict[str, dict[str, Any]]
    security: dict[str, Any]

    @classmethod
    def from_deployment(cls, deployment: Mapping[str, Any]) -> PodSpec:
        pod = deployment["spec"]["template"]["spec"]
        container = next(c for c in pod["containers"] if c["name"] == "dragate")
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        return cls(container, volumes, pod.get("securityContext", {}))

    def env(self) -> dict[str, str]:
        values = {}
        for item in self.container.get("env", []):
            if "value" in item:
                values[item["name"]] = item["value"]
            else:
                values[item["name"]] = FIELD_VALUES[item["valueFrom"]["fieldRef"]["fieldPath"]]
        return values


def expand(arg: str, env: Mapping[str, str]) -> str:
    """The kubelet's `$(VAR)` expansion in command and args."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), arg)


def resolve(rootfs: Path, command: str, path: str) -> str:
    if command.startswith("/"):
        return command
    for directory in path.split(":"):
        if (rootfs / directory.lstrip("/") / command).exists():
            return f"{directory}/{command}"
    raise FileNotFoundError(f"{command} is not on the image's PATH {path}")


def _mount_script(rootfs: Path, merged: Path, pod: PodSpec, sources: Mapping[str, Path],
                  own_net: bool) -> list[str]:  # fmt: skip
    """Host shell lines run in the new namespaces before `exec`ing into the image."""
    lower, root, scratch = (shlex.quote(str(p)) for p in (rootfs, merged, merged.parent / "upper"))
    group = str(pod.security.get("fsGroup", 0))
    lines = ["set -eu"]
    if own_net:
        lines.append("ip link set lo up")
    # An overlay over the cached rootfs, like a runtime's snapshot: the mount points of the
    # pod's volumes are made in it (the cache stays untouched), then it is made read-only.
    lines += [f"mkdir -p {scratch} {root}", f"mount -t tmpfs -o size=1m tmpfs {scratch}",
              f"mkdir {scratch}/u {scratch}/w",
              f"mount -t overlay overlay -o lowerdir={lower},upperdir={scratch}/u,"
              f"workdir={scratch}/w {root}"]  # fmt: skip
    mounts = pod.container.get("volumeMounts", [])
    for mount in mounts:
        lines.append(f"mkdir -p {shlex.quote(str(merged) + mount['mountPath'])}")
    lines += [f"mount -o remount,ro {root}", f"mount -t proc proc {root}/proc",
              f"mount -t tmpfs -o mode=755,size=1m,nosuid tmpfs {root}/dev"]  # fmt: skip
    for device in DEVICES:
        lines += [f"touch {root}/dev/{device}", f"mount --bind /dev/{device} {root}/dev/{device}"]
    lines += [f"ln -s /proc/self/fd {root}/dev/fd", f"mkdir {root}/dev/shm"]
    for mount in mounts:
        lines += _volume_lines(pod.volumes[mount["name"]], merged, mount, sources, group)
    return lines


def _volume_lines(volume: Mapping[str, Any], merged: Path, mount: Mapping[str, Any],
                  sources: Mapping[str, Path], group: str) -> list[str]:  # fmt: skip
    target = shlex.quote(f"{merged}{mount['mountPath']}")
    if "emptyDir" in volume:
        size = volume["emptyDir"].get("sizeLimit", "64Mi").replace("Mi", "m")
        return [f"mount -t tmpfs -o mode=1777,size={size},nosuid,nodev tmpfs {target}"]
    source = shlex.quote(str(sources[mount["name"]]))
    if "secret" in volume:  # the kubelet's tmpfs, files 0440 owned by fsGroup
        return [f"mount -t tmpfs -o mode=755,size=1m tmpfs {target}",
                f"cp {source}/* {target}/", f"chgrp {group} {target}/*",
                f"chmod 0440 {target}/*", f"mount -o remount,bind,ro {target}"]  # fmt: skip
    # configMap: a read-only bind mount of a ConfigMap-shaped directory
    return [f"mount --bind {source} {target}", f"mount -o remount,bind,ro {target}"]


def launch_argv(rootfs: Path, image: ImageConfig, pod: PodSpec, sources: Mapping[str, Path],
                workdir: Path, *, own_net: bool = True) -> list[str]:  # fmt: skip
    """The host argv that starts the pod's container from `rootfs` (mounted under workdir)."""
    env = {**image.env, **pod.env()}
    argv = [*(pod.container.get("command") or image.entrypoint), *pod.container.get("args", [])]
    argv = [expand(arg, env) for arg in argv]
    argv[0] = resolve(rootfs, argv[0], env["PATH"])
    context = pod.container.get("securityContext", {})
    user = context.get("runAsUser", image.user.split(":")[0])
    group = context.get("runAsGroup", image.user.split(":")[1])
    groups = str(pod.security.get("fsGroup", group))
    merged = workdir / "root"
    lines = _mount_script(rootfs, merged, pod, sources, own_net)
    env_args = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
    lines.append(
        f"exec env -i {env_args} chroot --userspec={user}:{group} --groups={groups} "
        f"{shlex.quote(str(merged))} {shlex.join(argv)}"
    )
    flags = ["--mount", "--pid", "--fork", "--kill-child"] + (["--net"] if own_net else [])
    return ["unshare", *flags, "--", "/bin/sh", "-c", "\n".join(lines)]


def configmap_dir(files: Sequence[Path], directory: Path) -> Path:
    """A directory laid out like a ConfigMap volume: `..data` -> a timestamped dir, and a
    symlink per file. dragate reads `--policies=<mount>/..data`."""
    versioned = directory / "..2026_01_01_00_00_00.000000001"
    versioned.mkdir(parents=True)
    for file in files:
        shutil.copy(file, versioned / file.name)
        (directory / file.name).symlink_to(f"..data/{file.name}")
    (directory / "..data").symlink_to(versioned.name)
    for path in (directory, versioned, *versioned.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return directory


def container_pid(unshare_pid: int) -> int | None:
    """The host PID of the pod's PID 1: unshare's only child."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == unshare_pid:
            return int(stat.parent.name)
    return None


def nsenter(
    pid: int, *argv: str, net: bool = False, root: bool = False, user: int | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `argv` in the container's network namespace, or in its mounts and root as `user`."""
    flags = [f"--target={pid}"]
    if net:
        flags.append("--net")
    if root:
        flags += ["--mount", "--root", "--wd"]
    if user is not None:
        flags += [f"--setuid={user}", f"--setgid={user}"]
    return subprocess.run(["nsenter", *flags, "--", *argv], capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip
