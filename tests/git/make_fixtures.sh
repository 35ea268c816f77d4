#!/usr/bin/env bash
# Builds the repositories, TLS certificates and SSH keys the git tests serve, under $1.
# Prints KEY=VALUE lines (commit SHAs) on stdout for the test fixture.
set -euo pipefail
root="$1"
repos="$root/repos"
mkdir -p "$repos" "$root/tls" "$root/ssh" "$root/work"
export GIT_AUTHOR_NAME=test GIT_AUTHOR_EMAIL=test@example.com GIT_COMMITTER_NAME=test \
  GIT_COMMITTER_EMAIL=test@example.com GIT_CONFIG_NOSYSTEM=1 HOME="$root/home"
mkdir -p "$HOME"
git config --global init.defaultBranch main
git config --global protocol.file.allow always
quiet() { "$@" >/dev/null 2>&1; }

# main: main (c1, c2), tags v1 (annotated) and light (lightweight) on c1, branch feature (c3),
# refs/pull/12/head (c4, on no branch).
src="$root/work/main"
quiet git init "$src"
cd "$src"
echo one >a.txt && git add a.txt && quiet git commit -m c1
c1=$(git rev-parse HEAD)
quiet git tag -a v1 -m "release 1"
git tag light
echo two >a.txt && quiet git commit -am c2
c2=$(git rev-parse HEAD)
quiet git checkout -b feature
echo feature >a.txt && quiet git commit -am c3
c3=$(git rev-parse HEAD)
quiet git checkout --detach "$c1"
echo pull >a.txt && quiet git commit -am c4
c4=$(git rev-parse HEAD)
quiet git checkout main
quiet git clone --bare "$src" "$repos/main.git"
git -C "$repos/main.git" update-ref refs/pull/12/head "$c4"
# As GitHub does: a commit reachable from any ref (refs/pull/* included) may be fetched by SHA.
git -C "$repos/main.git" config uploadpack.allowReachableSHA1InWant true
touch "$repos/main.git/git-daemon-export-ok"

# big: one 3 MiB incompressible file, for the full-disk and dropped-connection tests.
big="$root/work/big"
quiet git init "$big"
head -c 3145728 /dev/urandom >"$big/blob.bin"
quiet git -C "$big" add blob.bin
quiet git -C "$big" commit -m big
quiet git clone --bare "$big" "$repos/big.git"

# kinds: every kind of tree entry checkout writes (nested directories, an executable, a symbolic link, an
# empty file, many files), for the parallel checkout. crlf: the same with a .gitattributes asking for CRLF
# line endings, which only libgit2's own checkout (with filters) applies.
kinds="$root/work/kinds"
quiet git init "$kinds"
mkdir -p "$kinds/deep/er/still" "$kinds/many"
printf 'one\ntwo\n' >"$kinds/a.txt"
printf '#!/bin/sh\necho run\n' >"$kinds/deep/run.sh" && chmod +x "$kinds/deep/run.sh"
: >"$kinds/deep/er/still/empty"
ln -s ../a.txt "$kinds/deep/link"
for i in $(seq 1 200); do echo "file $i" >"$kinds/many/$i.txt"; done
quiet git -C "$kinds" add -A
quiet git -C "$kinds" commit -m kinds
quiet git clone --bare "$kinds" "$repos/kinds.git"
crlf="$root/work/crlf"
quiet git init "$crlf"
printf 'one\ntwo\n' >"$crlf/a.txt"
echo '*.txt eol=crlf' >"$crlf/.gitattributes"
quiet git -C "$crlf" add -A
quiet git -C "$crlf" commit -m crlf
quiet git clone --bare "$crlf" "$repos/crlf.git"

# super -> lib -> leaf, with relative submodule URLs.
for name in leaf lib super; do quiet git init "$root/work/$name"; done
echo leaf >"$root/work/leaf/leaf.txt"
quiet git -C "$root/work/leaf" add leaf.txt
quiet git -C "$root/work/leaf" commit -m leaf
quiet git clone --bare "$root/work/leaf" "$repos/leaf.git"
echo lib >"$root/work/lib/lib.txt"
quiet git -C "$root/work/lib" add lib.txt
quiet git -C "$root/work/lib" submodule add "$repos/leaf.git" leaf
git -C "$root/work/lib" config -f .gitmodules submodule.leaf.url ../leaf.git
quiet git -C "$root/work/lib" add .gitmodules
quiet git -C "$root/work/lib" commit -m lib
quiet git clone --bare "$root/work/lib" "$repos/lib.git"
echo super >"$root/work/super/super.txt"
quiet git -C "$root/work/super" add super.txt
quiet git -C "$root/work/super" submodule add "$repos/lib.git" lib
git -C "$root/work/super" config -f .gitmodules submodule.lib.url ../lib.git
quiet git -C "$root/work/super" add .gitmodules
quiet git -C "$root/work/super" commit -m super
quiet git clone --bare "$root/work/super" "$repos/super.git"

# lfs: model.bin stored with the real git-lfs client; the bare copy gets git-lfs's bare layout (lfs/objects).
lfs="$root/work/lfs"
quiet git init "$lfs"
cd "$lfs"
quiet git lfs install --local
quiet git lfs track "*.bin"
head -c 200000 /dev/urandom >model.bin
echo plain >notes.txt
quiet git add .gitattributes model.bin notes.txt
quiet git commit -m lfs
lfs_oid=$(git lfs ls-files -l | awk '{print $1}')
quiet git clone --bare "$lfs" "$repos/lfs.git"
mkdir -p "$repos/lfs.git/lfs"
cp -r "$lfs/.git/lfs/objects" "$repos/lfs.git/lfs/objects"
# lfsbad: the same, but its LFS server serves the object with one bit flipped.
cp -r "$repos/lfs.git" "$repos/lfsbad.git"
touch "$repos/lfsbad.git/lfs/objects/${lfs_oid:0:2}/${lfs_oid:2:2}/$lfs_oid.corrupt"
# lfsgone: its LFS server has no objects (error 404); lfsodd: it lists the object without a download action.
cp -r "$repos/lfs.git" "$repos/lfsgone.git"
rm -r "$repos/lfsgone.git/lfs/objects"
cp -r "$repos/lfs.git" "$repos/lfsodd.git"
touch "$repos/lfsodd.git/lfs/objects/${lfs_oid:0:2}/${lfs_oid:2:2}/$lfs_oid.noaction"
cd "$root"

# TLS: a CA made here, and a certificate for 127.0.0.1 signed by it; and an unrelated CA.
cd "$root/tls"
for ca in ca other-ca; do
  quiet openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=trainpoint test $ca" -keyout $ca.key -out $ca.crt
done
quiet openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr
# The DNS entry is for mbedTLS 2.x (Debian's libgit2), which matches host names against DNS entries only.
printf 'subjectAltName=DNS:127.0.0.1,IP:127.0.0.1\n' >san.ext
quiet openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out server.crt
printf 'tokenuser:%s\n' "$(openssl passwd -apr1 s3cret-token-value)" >"$root/htpasswd"

# SSH: the server's host key, the client's key (authorized) and a key the server does not know.
cd "$root/ssh"
for key in host client stranger impostor; do ssh-keygen -q -t ed25519 -N '' -C "$key" -f "$key"; done
cp client.pub authorized_keys

echo "C1=$c1"
echo "C2=$c2"
echo "C3=$c3"
echo "C4=$c4"
echo "LFS_OID=$lfs_oid"
echo "LFS_COMMIT=$(git -C "$lfs" rev-parse HEAD)"
echo "SUPER_COMMIT=$(git -C "$root/work/super" rev-parse HEAD)"
