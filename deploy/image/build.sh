#!/usr/bin/env bash
# The kubesched image without Docker: Debian bookworm's Python (the .deb files of
# deploy/image/debian-packages.lock, extracted, no dpkg/apt/shell in the image), the project's own
# wheel (`python -m build`) and its dependencies (the wheels of deploy/image/requirements.lock, by
# hash), packed as an OCI image by umoci (Debian package `umoci`).
#
# Reproducible: every file gets the commit's time (SOURCE_DATE_EPOCH, default: `git log -1 %ct`),
# the layer is written by umoci from that tree, the config's dates are that time too, and every
# input is pinned; so the same commit gives the same image digest (tests/integration/test_deploy_image.py
# builds twice and compares). Runs as 65532:65532 (no write needed anywhere: read-only root OK).
# deploy/Dockerfile is the same recipe for people with Docker (a test holds base, entrypoint, user).
#
#   deploy/image/build.sh [--out DIR]     # DIR (default: out/image): oci/ (OCI layout) and kubesched-image.tar
#   deploy/image/build.sh --wheel FILE    # pack this kubesched wheel instead of building one
#   deploy/image/build.sh --update-lock   # re-resolve both lock files (new Debian point release, new wheels)
#
# Needs: root (unpack owners), umoci, apt-get (download only), python3 with `build` and pip.
# Prints the image reference, its manifest digest and its size.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
[[ -x "$PYTHON" ]] || PYTHON="$(command -v python3)"
OUT="$REPO/out/image"
MODE=build
WHEEL=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT="$(realpath -m "$2")"; shift 2 ;;
    --update-lock) MODE=update-lock; shift ;;
    --wheel) WHEEL="$(realpath "$2")"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--out DIR] [--wheel FILE] [--update-lock]" >&2; exit 2 ;;
  esac
done

# The image's Python: Debian's python3.11 and the shared libraries its stdlib modules load (ssl,
# zlib, ctypes, pyexpat, bz2, lzma, uuid) and numpy's wheel links (libstdc++). Not the whole
# dependency closure: no dpkg, perl, tar, readline, sqlite; the image has no shell and no package
# manager.
DEB_PACKAGES=(libc6 libgcc-s1 libstdc++6 zlib1g libssl3 libffi8 libexpat1 libbz2-1.0 liblzma5 libuuid1
  libpython3.11-minimal libpython3.11-stdlib python3.11-minimal)
# The wheels pip may pick for the image's interpreter (Debian 12: glibc 2.36, CPython 3.11).
PIP_TARGET=(--only-binary=:all: --implementation cp --python-version 3.11 --abi cp311
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
SITE=usr/local/lib/python3.11/dist-packages   # on Debian python3.11's sys.path
PIN_DEBS="$HERE/debian-packages.lock"
PIN_WHEELS="$HERE/requirements.lock"

die() { echo "image: $*" >&2; exit 1; }
[[ "$(id -u)" == 0 ]] || die "run as root (the image's files must be owned by root)"
command -v umoci >/dev/null || die "umoci is missing: apt-get install umoci"
command -v apt-get >/dev/null || die "apt-get is missing (Debian/Ubuntu host needed to fetch the .deb files)"
"$PYTHON" -m build --version >/dev/null 2>&1 || die "$PYTHON has no 'build' module: pip install build"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [[ -n "$WHEEL" ]]; then
  wheel="$WHEEL"
else
  echo "image: building the wheel (python -m build)"
  "$PYTHON" -m build --wheel --outdir "$work/dist" "$REPO" >"$work/build.log" 2>&1 \
    || { cat "$work/build.log" >&2; die "python -m build failed"; }
  wheel="$(ls "$work"/dist/kubesched-*.whl)"
fi
version="$(basename "$wheel" | cut -d- -f2)"

if [[ "$MODE" == update-lock ]]; then
  (cd "$work" && apt-get download "${DEB_PACKAGES[@]}" >/dev/null 2>&1) || die "apt-get download failed (apt-get update?)"
  {
    echo "# Debian bookworm packages of the image (deploy/image/build.sh --update-lock writes this file)."
    for p in "${DEB_PACKAGES[@]}"; do dpkg-deb -f "$work"/"${p}"_*.deb Package Version | paste -sd= ; done \
      | sed 's/Package: //; s/=Version: /=/'
  } >"$PIN_DEBS"
  "$PYTHON" -m pip download -q --disable-pip-version-check "${PIP_TARGET[@]}" -d "$work/wheels" "$wheel"
  {
    echo "# The wheels of kubesched's dependencies in the image, by hash (deploy/image/build.sh --update-lock)."
    for w in "$work"/wheels/*.whl; do
      name="$(basename "$w" | cut -d- -f1)"; ver="$(basename "$w" | cut -d- -f2)"
      [[ "$name" == kubesched ]] && continue
      echo "$name==$ver --hash=sha256:$(sha256sum "$w" | cut -d' ' -f1)"
    done
  } >"$PIN_WHEELS"
  echo "image: wrote $PIN_DEBS and $PIN_WHEELS"
  exit 0
fi

SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || true)}"
[[ -n "$SOURCE_DATE_EPOCH" ]] || die "set SOURCE_DATE_EPOCH (no git history to take the commit time from)"
created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"

rootfs="$work/bundle/rootfs"
echo "image: Debian packages ($(grep -vc '^#' "$PIN_DEBS") from $PIN_DEBS)"
mapfile -t pins < <(grep -v '^#' "$PIN_DEBS")
mkdir -p "$work/debs"
if ! (cd "$work/debs" && apt-get download "${pins[@]}" >"$work/apt.log" 2>&1); then
  cat "$work/apt.log" >&2
  die "a pinned package version is no longer on the mirror (Debian replaced it with a point release): \
run deploy/image/build.sh --update-lock and commit $PIN_DEBS"
fi

oci="$work/oci"
tag="$version"
umoci init --layout "$oci"
umoci new --image "$oci:$tag"
umoci unpack --image "$oci:$tag" "$work/bundle" >/dev/null

for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$rootfs"; done
# Only the runtime: documentation, manuals, locales and Debian's maintainer files go.
rm -rf "$rootfs"/usr/share/{doc,man,lintian,locale,info,bug,binfmts} "$rootfs"/usr/lib/python3.11/{test,idlelib,tkinter,turtledemo,ensurepip,lib2to3}
ln -sf python3.11 "$rootfs/usr/bin/python3"

echo "image: Python packages ($(grep -vc '^#' "$PIN_WHEELS") wheels from $PIN_WHEELS, then the kubesched wheel)"
pip_install=("$PYTHON" -m pip install -q --disable-pip-version-check --no-compile --no-warn-script-location
  "${PIP_TARGET[@]}" --target "$rootfs/$SITE")
"${pip_install[@]}" --require-hashes --no-deps -r "$PIN_WHEELS"
rm -rf "$rootfs/$SITE/bin"
"${pip_install[@]}" --no-deps "$wheel"
# pip records where the wheel came from (a temporary path) and writes console scripts for the
# build host's interpreter: neither belongs in the image. The launcher below is pip's own script
# for the image's interpreter (what `pip install` in deploy/Dockerfile writes to /usr/local/bin).
rm -rf "$rootfs/$SITE/bin"
find "$rootfs/$SITE" -name direct_url.json -delete
sed -i '/direct_url.json/d' "$rootfs/$SITE"/kubesched-*.dist-info/RECORD
mkdir -p "$rootfs/usr/local/bin"
for script in kubesched:main kubectl-kubesched:kubectl_plugin; do
  printf '#!/usr/bin/python3.11\nimport sys\nfrom kubesched.cli import %s\nif __name__ == "__main__":\n    sys.exit(%s())\n' \
    "${script#*:}" "${script#*:}" >"$rootfs/usr/local/bin/${script%%:*}"
  chmod 0755 "$rootfs/usr/local/bin/${script%%:*}"
done
# The unprivileged user (distroless' nonroot): a name for 65532 and a home it does not need to write.
mkdir -p "$rootfs/etc" "$rootfs/home/nonroot" "$rootfs/tmp"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
chown 65532:65532 "$rootfs/home/nonroot"
chmod 1777 "$rootfs/tmp"
# The installed tree must run under the image's own interpreter before it is packed: every shell's
# modules import (numpy's and the other wheels' shared libraries resolve) and a simulation runs.
chroot "$rootfs" /usr/bin/python3.11 -c 'import kubesched.live.runner, kubesched.extender.command, kubesched.simulate.command' \
  || die "kubesched's modules do not import in the image's rootfs (a shared library missing from DEB_PACKAGES?)"
chroot "$rootfs" /usr/local/bin/kubesched simulate --nodes 3 --pods 5 -q >/dev/null \
  || die "kubesched simulate fails in the image's rootfs"
find "$rootfs" -name __pycache__ -prune -exec rm -rf {} +
# Bytecode, compiled once here. The image runs with PYTHONDONTWRITEBYTECODE on a read-only root, and
# the Debian packages were extracted without their maintainer scripts (which compile the standard
# library): without this, every start compiles every module it imports, ~1.1 CPU s of each start of
# `kubesched run` before its first request (issue 32 item 2). unchecked-hash: the .pyc files hold a
# hash of their source, not its time (reproducible), and are never checked against it (the image's
# files do not change). One process, in a fixed order, for the same bytes on every build; -I: the
# builder's PYTHONPYCACHEPREFIX or PYTHONOPTIMIZE would write other files.
# kubernetes_asyncio's generated API and models (~20 MB of bytecode) are left out: kubesched
# imports only its kubeconfig loaders (kubesched/kube/kubeconfig_loaders.py).
chroot "$rootfs" /usr/bin/python3.11 -I -m compileall -q -j 1 --invalidation-mode unchecked-hash \
  -x 'kubernetes_asyncio/client/(api|models)/' /usr/lib/python3.11 "/$SITE" \
  || die "compiling the image's Python modules failed"
find "$rootfs" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

umoci repack --image "$oci:$tag" --history.created "$created" --history.created_by "deploy/image/build.sh" \
  --history.comment "Debian bookworm python3.11 + kubesched $version" "$work/bundle"
umoci config --image "$oci:$tag" --no-history --created "$created" --os linux --architecture amd64 \
  --config.user 65532:65532 --config.workingdir / \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1 \
  --config.entrypoint kubesched \
  --config.cmd run --config.cmd --config=/etc/kubesched/config.yaml --config.cmd --health-addr=0.0.0.0:10251 \
  --config.exposedports 10251/tcp \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.created=$created"
umoci gc --layout "$oci"

rm -rf "$OUT"
mkdir -p "$OUT"
cp -r "$oci" "$OUT/oci"
# An OCI archive (what `ctr images import` and `skopeo copy oci-archive:` read), itself reproducible.
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -C "$OUT/oci" -cf "$OUT/kubesched-image.tar" .
digest="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$OUT/oci/index.json")"
echo "$digest" >"$OUT/digest"
layers_size="$(du -cb "$OUT"/oci/blobs/sha256/* | tail -1 | cut -f1)"
echo "image: kubesched:$tag $digest"
echo "image: $((layers_size / 1024 / 1024)) MiB compressed, $(du -sm "$rootfs" | cut -f1) MiB unpacked -> $OUT"
