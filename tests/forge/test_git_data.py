"""A repository's git data and files over the API: a pull's commits and files, commit, tree and
blob objects, contents at a ref, tags, a single ref, and the `raw` text of a file; with the
answers GitHub gives to paths, shas and refs that name nothing (never a 500)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from github import GithubException, UnknownObjectException

from agent_harness.testing.forge import TOKEN, RunningForge

pytestmark = pytest.mark.integration

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
}


def git(cwd: Path, *args: str, input: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=ENV, capture_output=True, text=True, check=True, input=input
    )
    return done.stdout.strip()


def fetch(url: str, token: str | None = TOKEN) -> tuple[int, dict[str, str], bytes]:
    """A GET as a client following a link does it: the status, headers and bytes."""
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def fetch_json(url: str) -> tuple[int, Any]:
    status, _, body = fetch(url)
    return status, json.loads(body) if body else None


@pytest.fixture
def clone(tmp_path: Path, repo: Any) -> Path:
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", repo.clone_url, str(work))
    return work


def commit_files(clone: Path, branch: str, files: dict[str, str], message: str) -> str:
    """Commit `files` (path -> text) on `branch` (made from main if new) and push it."""
    git(clone, "checkout", "-q", "-B", branch, "origin/main")
    for name, text in files.items():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text(text)
        git(clone, "add", name)
    git(clone, "commit", "-q", "-m", message)
    git(clone, "push", "-q", "-f", "origin", branch)
    return git(clone, "rev-parse", "HEAD")


def test_a_pull_lists_its_commits_and_files_also_once_merged(repo: Any, clone: Path) -> None:
    commit_files(clone, "feature", {"src/app.py": "print('hi')\n"}, "Add the app")
    (clone / "README.md").write_text("# demo\n\nmore words\n")
    git(clone, "commit", "-q", "-am", "Say more in the readme")
    git(clone, "push", "-q", "origin", "feature")
    pull = repo.create_pull(title="Feature", body="", head="feature", base="main")

    commits = list(pull.get_commits())
    files = list(pull.get_files())

    assert [c.commit.message for c in commits] == ["Add the app", "Say more in the readme"]
    assert commits[0].commit.author.email == "dev@example.com"
    assert sorted((f.filename, f.status, f.additions) for f in files) == [
        ("README.md", "modified", 1),
        ("src/app.py", "added", 1),
    ]
    before = repo.get_pull(pull.number)
    sizes = (before.commits, before.additions, before.deletions, before.changed_files)
    assert sizes[0] == 2 and sizes[3] == 2 and sizes[1] >= 2
    pull.merge(merge_method="squash")
    assert [c.sha for c in pull.get_commits()] == [c.sha for c in commits]
    assert {f.filename for f in pull.get_files()} == {"README.md", "src/app.py"}
    merged = repo.get_pull(pull.number)  # GitHub keeps a merged pull's size
    assert merged.merged
    assert (merged.commits, merged.additions, merged.deletions, merged.changed_files) == sizes
    with pytest.raises(UnknownObjectException):
        repo.get_pull(99).get_files().totalCount  # noqa: B018


def test_commit_tree_and_blob_objects_read_as_git_holds_them(repo: Any, clone: Path) -> None:
    sha = commit_files(clone, "main", {"docs/guide.md": "read me\n", "a.txt": "a\n"}, "Guide")

    commit = repo.get_git_commit(sha)
    flat = repo.get_git_tree(commit.tree.sha)
    deep = repo.get_git_tree("main", recursive=True)
    blob = repo.get_git_blob(next(e.sha for e in deep.tree if e.path == "docs/guide.md"))

    assert commit.message == "Guide" and commit.author.name == "Dev"
    assert [p.sha for p in commit.parents] == [git(clone, "rev-parse", "HEAD~1")]
    assert sorted((e.path, e.type) for e in flat.tree) == [
        ("README.md", "blob"),
        ("a.txt", "blob"),
        ("docs", "tree"),
    ]
    assert sorted(e.path for e in deep.tree) == ["README.md", "a.txt", "docs", "docs/guide.md"]
    assert deep.sha == commit.tree.sha and not deep.raw_data["truncated"]
    assert blob.encoding == "base64" and blob.size == 8
    assert base64.b64decode(blob.content) == b"read me\n"


def test_contents_of_a_file_a_directory_and_at_a_ref(repo: Any, clone: Path) -> None:
    commit_files(clone, "main", {"docs/guide.md": "version one\n"}, "Guide")
    commit_files(clone, "other", {"docs/guide.md": "version two\n"}, "Other guide")

    file = repo.get_contents("docs/guide.md")
    other = repo.get_contents("docs/guide.md", ref="other")
    listed = repo.get_contents("docs")
    root = repo.get_contents("")

    assert file.decoded_content == b"version one\n" and file.encoding == "base64"
    assert (file.type, file.name, file.path, file.size) == ("file", "guide.md", "docs/guide.md", 12)
    assert other.decoded_content == b"version two\n"
    assert [(e.type, e.path) for e in listed] == [("file", "docs/guide.md")]
    assert listed[0].decoded_content == b"version one\n"  # completed from its own `url`
    assert sorted((e.type, e.name) for e in root) == [("dir", "docs"), ("file", "README.md")]
    status, _, text = fetch(file.download_url, token=None)
    assert (status, text) == (200, b"version one\n")
    [folder] = [entry for entry in root if entry.type == "dir"]
    status, _, page = fetch(folder.html_url, token=None)  # a folder's page lists its files
    assert status == 200 and b"guide.md" in page and b"/blob/" in page
    with pytest.raises(UnknownObjectException):
        repo.get_contents("docs/missing.md")
    with pytest.raises(GithubException) as missing_ref:
        repo.get_contents("docs/guide.md", ref="no-such-branch")
    assert missing_ref.value.status == 404
    assert missing_ref.value.data["message"] == "No commit found for the ref no-such-branch"


def test_tags_and_a_single_ref_answer_where_their_urls_point(repo: Any, clone: Path) -> None:
    assert list(repo.get_tags()) == []
    first = git(clone, "rev-parse", "HEAD")
    second = commit_files(clone, "main", {"b.txt": "b\n"}, "Second")
    git(clone, "tag", "v1.0", first)
    git(clone, "tag", "-a", "-m", "release", "v1.10", second)
    git(clone, "push", "-q", "origin", "--tags")

    tags = list(repo.get_tags())
    ref = repo.get_git_refs()[0]
    status, single = fetch_json(ref.url)
    status_folder, folder = fetch_json(f"{repo.url}/git/refs/tags")

    assert [(t.name, t.commit.sha) for t in tags] == [("v1.10", second), ("v1.0", first)]
    assert status == 200 and single["ref"] == ref.ref and single["object"]["sha"] == ref.object.sha
    assert status_folder == 200 and [r["ref"] for r in folder] == [
        "refs/tags/v1.0",
        "refs/tags/v1.10",
    ]
    assert fetch_json(f"{repo.url}/git/refs/heads/nothing")[0] == 404


def test_raw_serves_a_files_bytes_as_plain_text(hub: RunningForge, repo: Any, clone: Path) -> None:
    page = "<html><script>alert(1)</script></html>\n"
    commit_files(clone, "feature", {"page.html": page, "a b#c.txt": "odd\n"}, "Pages")
    pull = repo.create_pull(title="Pages", body="", head="feature", base="main")
    files = {f.filename: f for f in pull.get_files()}

    status, headers, data = fetch(files["page.html"].raw_url, token=None)
    odd_status, _, odd = fetch(files["a b#c.txt"].raw_url, token=None)
    content_status, content = fetch_json(files["a b#c.txt"].contents_url)

    assert (status, data) == (200, page.encode())
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert (odd_status, odd) == (200, b"odd\n")
    assert content_status == 200 and content["path"] == "a b#c.txt"
    missing = files["page.html"].raw_url.replace("page.html", "nothing.html")
    assert fetch(missing, token=None)[0] == 404


# Each hostile request beside the same route asked properly (which answers 200): what is
# refused is the path, sha or ref, not the route.
@pytest.mark.parametrize(
    ("path", "status", "fine"),
    [
        ("contents/..%2F..%2Fforge.sqlite3", 404, "contents/README.md"),
        ("contents/docs/../README.md", 404, "contents/README.md"),
        ("contents/%2e%2e/%2e%2e/forge.sqlite3", 404, "contents/README.md"),
        ("contents//etc/passwd", 404, "contents/README.md"),
        ("contents/README.md%00", 404, "contents/README.md"),
        ("contents/README.md?ref=..%2F..", 404, "contents/README.md?ref=main"),
        ("contents/README.md?ref=%00", 404, "contents/README.md?ref=main"),
        ("contents/README.md?ref=--output%3D%2Ftmp%2Fx", 404, "contents/README.md?ref={commit}"),
        ("git/blobs/not-a-sha", 422, "git/blobs/{blob}"),
        ("git/blobs/" + "0" * 40, 404, "git/blobs/{blob}"),
        ("git/blobs/{commit}", 404, "git/blobs/{blob}"),
        ("git/commits/HEAD", 404, "git/commits/{commit}"),
        ("git/commits/" + "f" * 40, 404, "git/commits/{commit}"),
        ("git/trees/..%2F..", 404, "git/trees/main"),
        ("git/trees/no-such-branch", 404, "git/trees/{tree}"),
        ("git/trees/%00", 404, "git/trees/{commit}"),
        ("git/trees/{blob}", 404, "git/trees/{tree}"),
        ("git/refs/heads/%00", 404, "git/refs/heads/main"),
        ("git/refs/..%2F..%2Fconfig", 404, "git/refs/heads/main"),
        ("pulls/1/files", 404, "tags"),
        ("commits?sha=%00", 404, "commits?sha=main"),  # routes that were 500s before
        ("commits/%00", 422, "commits/main"),
        ("git/ref/heads/%00", 404, "git/ref/heads/main"),
    ],
)
def test_a_path_sha_or_ref_that_names_nothing_is_githubs_answer_not_a_500(
    hub: RunningForge, repo: Any, path: str, status: int, fine: str
) -> None:
    commit = repo.get_branch("main").commit.sha
    tree = repo.get_git_commit(commit).tree.sha
    blob = repo.get_git_tree(tree).tree[0].sha
    names = {"commit": commit, "tree": tree, "blob": blob}

    assert fetch_json(f"{repo.url}/{fine.format(**names)}")[0] == 200
    got, body = fetch_json(f"{repo.url}/{path.format(**names)}")
    assert got == status, body
    assert "Server Error" not in body["message"]


@pytest.mark.parametrize(
    "tail", ["raw/main/..%2F..%2Fforge.sqlite3", "raw/main/../config", "raw/%00/x", "blob/main/.."]
)
def test_a_raw_or_blob_page_reads_nothing_outside_the_repository(
    hub: RunningForge, repo: Any, tail: str
) -> None:
    assert fetch(f"{repo.html_url}/{tail.split('/')[0]}/main/README.md", token=None)[0] == 200
    status, _, data = fetch(f"{repo.html_url}/{tail}", token=None)
    assert status == 404 and b"sqlite" not in data.lower() and b"[core]" not in data


def test_a_tree_past_its_limit_is_cut_and_marked_truncated(
    hub: RunningForge, repo: Any, clone: Path
) -> None:
    hub.forge.tree_limit = 6  # GitHub's is 100,000 entries: as many would take seconds here
    blob = git(clone, "hash-object", "-w", "--stdin", input="x\n")
    wide = git(clone, "mktree", input="".join(f"100644 blob {blob}\tf{i}\n" for i in range(3)))
    root = git(clone, "mktree", input=f"040000 tree {wide}\ta\n040000 tree {wide}\tb\n")
    sha = git(clone, "commit-tree", root, "-m", "wide")
    git(clone, "push", "-q", "origin", f"{sha}:refs/heads/wide")

    flat = repo.get_git_tree("wide")
    deep = repo.get_git_tree("wide", recursive=True)

    assert [e.path for e in flat.tree] == ["a", "b"] and flat.raw_data["truncated"] is False
    assert [e.path for e in deep.tree] == ["a", "a/f0", "a/f1", "a/f2", "b", "b/f0"]
    assert deep.raw_data["truncated"] is True
    assert {e.size for e in deep.tree if e.type == "blob"} == {2}


def test_an_empty_repository_answers_409_for_a_tree_and_404_for_contents(hub: RunningForge) -> None:
    empty = hub.github.get_user().create_repo("empty")
    with pytest.raises(GithubException) as tree:
        empty.get_git_tree("main")
    with pytest.raises(GithubException) as contents:
        empty.get_contents("README.md")
    assert tree.value.status == 409 and contents.value.status == 404


def test_a_file_name_that_is_not_utf8_is_listed_and_read_by_its_bytes(
    repo: Any, clone: Path
) -> None:
    name = os.fsdecode(b"caf\xe9.txt")  # Latin-1: a name git keeps as bytes
    (clone / name).write_bytes(b"\xff\xfe raw bytes\n")
    git(clone, "add", name)
    git(clone, "commit", "-q", "-m", "Latin-1 name")
    git(clone, "push", "-q", "origin", "HEAD:main")

    listed = next(e for e in repo.get_contents("") if e.name != "README.md")
    status, one = fetch_json(listed.url)
    raw_status, _, raw = fetch(listed.download_url, token=None)

    assert status == 200 and base64.b64decode(one["content"]) == b"\xff\xfe raw bytes\n"
    assert (raw_status, raw) == (200, b"\xff\xfe raw bytes\n")
    assert "%E9" in listed.url


def test_a_symlink_answers_its_file_or_itself_and_a_submodule_where_it_comes_from(
    repo: Any, clone: Path
) -> None:
    os.symlink("README.md", clone / "link")
    os.symlink("../../../etc/passwd", clone / "out")
    head = git(clone, "rev-parse", "HEAD")
    git(clone, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor/lib")
    (clone / ".gitmodules").write_text(
        '[submodule "lib"]\n\tpath = vendor/lib\n\turl = https://example.com/lib.git\n'
    )
    git(clone, "add", "link", "out", ".gitmodules")
    git(clone, "commit", "-q", "-m", "Links")
    git(clone, "push", "-q", "origin", "HEAD:main")

    linked = repo.get_contents("link")
    _, out = fetch_json(f"{repo.url}/contents/out")
    _, lib = fetch_json(f"{repo.url}/contents/vendor/lib")
    raw_status, _, raw = fetch(f"{repo.html_url}/raw/main/out", token=None)

    assert (linked.type, linked.path) == ("file", "README.md")
    assert linked.decoded_content == b"# demo\n\n\n"
    assert (out["type"], out["target"]) == ("symlink", "../../../etc/passwd")
    assert (lib["type"], lib["submodule_git_url"]) == ("submodule", "https://example.com/lib.git")
    assert [e["type"] for e in fetch_json(f"{repo.url}/contents/vendor")[1]] == ["file"]
    assert (raw_status, raw) == (200, b"../../../etc/passwd")  # the link itself, as git holds it
