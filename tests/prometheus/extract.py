#!/usr/bin/env python3
"""Extracts Prometheus' own test tables into JSON data files (issue 32).

Usage: extract.py GIT_DIR [TAG]   (GIT_DIR: a prometheus/prometheus mirror,
       e.g. the one the `fetch` tool gives; TAG defaults to v3.14.0)

Reads, with `git show TAG:path`, nothing else:
  model/relabel/relabel_test.go    TestRelabel's table      -> relabel.json
  config/config_test.go            expectedErrors, and the config/testdata
                                   files they name (plus files those reference)
                                                            -> bad_configs.json,
                                                               testdata/
  promql/parser/parse_test.go      testExpr's "Test Vector selector." section
                                   without offset/@ modifiers
  promql/parser/lex_test.go        the "selectors" group    -> selectors.json

The Go composite literals are parsed by a small tokenizer/reader below (no
Go toolchain needed). The output is test data from Prometheus, Apache-2.0:
each JSON file names its source file, tag and commit (see NOTICE).
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def git_show(gitdir, tag, path, binary=False):
    out = subprocess.run(["git", "--git-dir", gitdir, "show", f"{tag}:{path}"],
                         check=True, capture_output=True).stdout
    return out if binary else out.decode("utf-8", "surrogateescape")


# ---- a reader for the subset of Go literals the tables use ----

TOK = re.compile(r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<raw>`[^`]*`)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<chr>'(?:[^'\\\n]|\\.)*')
  | (?P<num>-?[0-9][0-9a-fA-Fx_.]*)
  | (?P<op>\[\]\*?|map\[|[{}()\[\],:&*+\-/])
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<other>.)
""", re.S | re.X)


def go_unquote(s):
    """A Go interpreted string literal's bytes (returned as str of code
    points, invalid UTF-8 bytes kept as surrogate escapes)."""
    body = s[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        e = body[i + 1]
        i += 2
        simple = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'",
                  "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
        if e in simple:
            out += simple[e].encode()
        elif e == "x":
            out.append(int(body[i:i + 2], 16))
            i += 2
        elif e in "uU":
            n = 4 if e == "u" else 8
            out += chr(int(body[i:i + n], 16)).encode()
            i += n
        elif e in "01234567":
            out.append(int(body[i - 1:i + 2], 8))
            i += 2
        else:
            raise ValueError(f"escape \\{e} in {s}")
    return out.decode("utf-8", "surrogateescape")


def tokens(src):
    pos = 0
    out = []
    while pos < len(src):
        m = TOK.match(src, pos)
        if not m:
            raise ValueError(f"cannot tokenize at {src[pos:pos + 40]!r}")
        pos = m.end()
        k = m.lastgroup
        if k == "ws":
            continue
        v = m.group()
        if k == "raw":
            out.append(("str", v[1:-1]))
        elif k == "str":
            out.append(("str", go_unquote(v)))
        else:
            out.append((k, v))
    return out


class Reader:
    """value := string (+ string)* | number | ident [ '(' args ')' ] [ '{' elems '}' ]
    | '&' value | type '{' elems '}' ; a composite is {"_type": T, "items": [...],
    "fields": {...}}; a call is {"_call": name, "args": [...]}."""

    def __init__(self, toks):
        self.t = toks
        self.i = 0

    def peek(self, k=0):
        # ("str", v) tokens are compared by kind first where it matters
        return self.t[self.i + k] if self.i + k < len(self.t) else (None, None)

    def take(self, v=None):
        tok = self.t[self.i]
        if v is not None and tok[1] != v:
            raise ValueError(f"want {v} got {tok} near {self.t[self.i - 5:self.i + 5]}")
        self.i += 1
        return tok

    def typ(self):
        parts = []
        while True:
            k, v = self.peek()
            if v in ("[]", "[]*", "*", "&"):
                parts.append(self.take()[1])
            elif v == "map[":
                self.take()
                parts.append("map[" + self.typ() + "]")
                self.take("]")
            elif k == "id":
                parts.append(self.take()[1])
                return "".join(parts)
            else:
                return "".join(parts)

    def value(self):
        v = self.operand()
        while self.peek()[0] == "op" and self.peek()[1] in ("+", "-", "*", "/"):
            op = self.take()[1]
            w = self.operand()
            if op == "+" and isinstance(v, str) and isinstance(w, str):
                v = v + w
            else:
                v = {"_expr": op, "args": [v, w]}
        return v

    def operand(self):
        k, v = self.peek()
        if k == "str":
            return self.take()[1]
        if v in ("-", "+"):  # unary
            self.take()
            return {"_expr": v, "args": [self.operand()]}
        if v == "(":
            self.take()
            x = self.value()
            self.take(")")
            return x
        if k == "str":
            s = self.take()[1]
            while self.peek() == ("op", "+") and self.peek(1)[0] == "str" and \
                    self.peek(2) != ("op", "."):
                self.take()
                s += self.take()[1]
            return s
        if k == "num":
            self.take()
            v2 = v
            # products like 5 * time.Minute are not needed by these tables
            return int(v2) if re.fullmatch(r"-?\d+", v2) else v2
        if v == "{":
            return self.composite(None)
        if v == "&":
            self.take()
            return self.operand()
        t = self.typ()
        if not t:
            raise ValueError(f"unexpected {self.peek()} near {self.t[max(0, self.i - 12):self.i + 8]}")
        k, v = self.peek()
        if v == "{":
            return self.composite(t)
        if v == "(":
            self.take()
            args = []
            while self.peek() != ("op", ")"):
                args.append(self.value())
                if self.peek() == ("op", ","):
                    self.take()
            self.take(")")
            return {"_call": t, "args": args}
        return {"_ident": t}

    def composite(self, t):
        self.take("{")
        items, fields = [], {}
        while self.peek() != ("op", "}"):
            if self.peek()[0] in ("id", "str") and self.peek(1) == ("op", ":"):
                key = self.take()[1]
                self.take(":")
                fields[key] = self.value()
            else:
                items.append(self.value())
            if self.peek() == ("op", ","):
                self.take()
        self.take("}")
        return {"_type": t, "items": items, "fields": fields}


def table(src, start_pat):
    """The composite literal that starts at the first '{' after start_pat."""
    i = src.index(start_pat)
    j = src.index("{", i + len(start_pat) - 1)
    depth = 0
    toks = tokens(src[j:])  # tokenizing the rest of the file is fine
    r = Reader(toks)
    return r.composite("table")


# ---- relabel ----

ACTIONS = {"Replace": "replace", "Keep": "keep", "Drop": "drop", "HashMod": "hashmod",
           "LabelMap": "labelmap", "LabelDrop": "labeldrop", "LabelKeep": "labelkeep",
           "Lowercase": "lowercase", "Uppercase": "uppercase", "KeepEqual": "keepequal",
           "DropEqual": "dropequal"}


def labels_of(v):
    if isinstance(v, dict) and v.get("_call") == "labels.FromMap":
        m = v["args"][0]
        return dict(m["fields"])
    if isinstance(v, dict) and v.get("_call") == "labels.FromStrings":
        a = v["args"]
        return {a[i]: a[i + 1] for i in range(0, len(a), 2)}
    if isinstance(v, dict) and v.get("_call") == "labels.EmptyLabels":
        return {}
    raise ValueError(f"labels: {v}")


def relabel_rule(c):
    f = c["fields"]
    r = {}
    for k, v in f.items():
        if k == "SourceLabels":
            r["source_labels"] = v["items"]
        elif k == "Regex":
            assert v["_call"] == "MustNewRegexp", v
            r["regex"] = v["args"][0]
        elif k == "TargetLabel":
            r["target_label"] = v
        elif k == "Separator":
            r["separator"] = v
        elif k == "Replacement":
            r["replacement"] = v
        elif k == "Action":
            r["action"] = ACTIONS[v["_ident"]]
        elif k == "Modulus":
            r["modulus"] = v
        elif k == "NameValidationScheme":
            pass
        else:
            raise ValueError(f"relabel field {k}")
    # TestRelabel's defaults (DefaultRelabelConfig): an empty Replacement or
    # Regex means the default; written out so YAML gives the same rule.
    if r.get("replacement", "") == "":
        r.pop("replacement", None)
    if r.get("regex", "") == "":
        r.pop("regex", None)
    return r


def extract_relabel(gitdir, tag, commit):
    path = "model/relabel/relabel_test.go"
    src = git_show(gitdir, tag, path)
    body = src[src.index("func TestRelabel(t *testing.T)"):]
    t = table(body, "}{")  # the tests slice literal after its struct type
    cases = []
    for n, c in enumerate(t["items"]):
        f = c["fields"]
        cases.append({
            "index": n,
            "input": labels_of(f["input"]),
            "relabel": [relabel_rule(r) for r in f["relabel"]["items"]],
            "drop": bool(f.get("drop", {}).get("_ident") == "true") if "drop" in f else False,
            "output": labels_of(f["output"]) if "output" in f else None,
        })
    return header(path, tag, commit, "TestRelabel's cases, in order"), cases


# ---- bad configs ----

def extract_bad_configs(gitdir, tag, commit):
    path = "config/config_test.go"
    src = git_show(gitdir, tag, path)
    t = table(src, "var expectedErrors = []struct {\n\tfilename string\n\terrMsg   string\n}{")
    names = subprocess.run(["git", "--git-dir", gitdir, "ls-tree", "--name-only", "-r", tag,
                            "config/testdata/"], check=True, capture_output=True,
                           text=True).stdout.split()
    cases = []
    files = set()
    for c in t["items"]:
        fn, msg = c["fields"]["filename"], c["fields"]["errMsg"]
        if isinstance(msg, dict):
            raise ValueError(f"errMsg of {fn} is not a literal")
        cases.append({"file": fn, "error": msg})
        files.add("config/testdata/" + fn)
        text = git_show(gitdir, tag, "config/testdata/" + fn)
        # files the config names (file_sd files, certs, keys, password files)
        for m in re.finditer(r"[\w./-]+", text):
            ref = os.path.normpath("config/testdata/" + m.group())
            if ref in names and ref != "config/testdata/" + fn:
                files.add(ref)
    outdir = os.path.join(HERE, "testdata")
    os.makedirs(outdir, exist_ok=True)
    for f in sorted(files):
        rel = f[len("config/testdata/"):]
        dst = os.path.join(outdir, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as fh:
            fh.write(git_show(gitdir, tag, f, binary=True))
    h = header(path, tag, commit, "expectedErrors (TestBadConfigs); the files are "
               "config/testdata/ copied unchanged into tests/prometheus/testdata/")
    return h, cases


# ---- selectors ----

MATCH = {"labels.MatchEqual": "=", "labels.MatchNotEqual": "!=",
         "labels.MatchRegexp": "=~", "labels.MatchNotRegexp": "!~"}


def matchers_of(vs):
    out = []
    for m in vs["fields"].get("LabelMatchers", {"items": []})["items"]:
        assert m["_call"] == "MustLabelMatcher", m
        typ, name, val = m["args"]
        name = "__name__" if isinstance(name, dict) and name.get("_ident") == \
            "model.MetricNameLabel" else name
        out.append([name, MATCH[typ["_ident"]], val])
    return out


def err_of(c):
    f = c["fields"]
    if "errMsg" in f and isinstance(f["errMsg"], str):
        return f["errMsg"]
    if "errors" in f:
        msgs = []
        for e in f["errors"]["items"]:
            err = e["fields"].get("Err")
            if isinstance(err, dict) and err.get("_call") == "errors.New":
                msgs.append(err["args"][0])
        return "; ".join(msgs) or None
    return None


def matches_empty(op, val):
    if op == "=":
        return val == ""
    if op == "!=":
        return val != ""
    rx = re.compile("(?:" + val.replace("(?<", "(?P<") + ")\\Z")
    hit = bool(rx.match(""))
    return hit if op == "=~" else not hit


def extract_selectors(gitdir, tag, commit):
    cases = []
    ppath = "promql/parser/parse_test.go"
    src = git_show(gitdir, tag, ppath)
    start = src.index("\t// Test Vector selector.")
    end = src.index("\t// Test matrix selector.")
    # positions: re-read the section alone to know which inputs belong to it
    sect = Reader(tokens("{" + src[start:end] + "}")).composite("section")
    out = []
    for c in sect["items"]:
        f = c["fields"]
        inp = f["input"]
        if not isinstance(inp, str):
            continue  # computed inputs (fmt.Sprintf("foo @ %f", ...)): @ modifiers
        if re.search(r"\boffset\b|\bOFFSET\b| @ ", inp):
            continue  # modifiers: /api/v1/series takes no offset or @
        if f.get("fail", {}).get("_ident") == "true":
            out.append({"source": "parse_test", "input": inp, "valid": False,
                        "error": err_of(c)})
            continue
        e = f["expected"]
        if e.get("_type") != "VectorSelector":
            out.append({"source": "parse_test", "input": inp, "valid": None,
                        "note": "not a plain selector: " + str(e.get("_type"))})
            continue
        out.append({"source": "parse_test", "input": inp, "valid": True,
                    "matchers": matchers_of(e)})
    lpath = "promql/parser/lex_test.go"
    lsrc = git_show(gitdir, tag, lpath)
    i = lsrc.index('name: "selectors"')
    j = lsrc.index("tests: []testCase{", i) + len("tests: []testCase")
    grp = Reader(tokens(lsrc[j:])).composite("group")
    for c in grp["items"]:
        f = c["fields"]
        inp = f["input"]
        if f.get("fail", {}).get("_ident") == "true":
            out.append({"source": "lex_test", "input": inp, "valid": False,
                        "error": "lexer error"})
            continue
        # the lexer accepts it; the parser then refuses a selector whose
        # every matcher matches the empty string (as parse_test's {x=""}).
        toks = [it["items"] for it in f["expected"]["items"]]
        ms, k = [], 1
        while k + 2 < len(toks):
            name, op, val = toks[k][2], toks[k + 1][2], toks[k + 2][2]
            val = val[1:-1] if val[0] == '`' else go_unquote(val)
            ms.append([name, op, val])
            k += 3
            if toks[k][0]["_ident"] == "COMMA":
                k += 1
        valid = not all(matches_empty(op, v) for _, op, v in ms)
        out.append({"source": "lex_test", "input": inp, "valid": valid,
                    "matchers": ms if valid else None,
                    "error": None if valid else
                    "vector selector must contain at least one non-empty matcher"})
    h = header(f"{ppath} (testExpr, section \"Test Vector selector.\" without offset/@) "
               f"and {lpath} (group \"selectors\")", tag, commit, "valid: true = Prometheus "
               "parses it into the given matchers; false = a parse error")
    return h, out


def header(src, tag, commit, what):
    return {"source": f"https://github.com/prometheus/prometheus {src}",
            "tag": tag, "commit": commit, "what": what,
            "license": "Test data from Prometheus, Copyright The Prometheus Authors, "
                       "Apache License 2.0 (see NOTICE); extracted by "
                       "tests/prometheus/extract.py, not edited by hand."}


def write(name, h, cases, exceptions=None):
    doc = {"header": h, "cases": cases}
    with open(os.path.join(HERE, name), "w", encoding="utf-8", errors="surrogateescape") as f:
        # ensure_ascii keeps invalid UTF-8 bytes (\udcXX) round-trippable:
        # the test maps \udc80..\udcff back to the raw bytes 0x80..0xff.
        json.dump(doc, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"{name}: {len(cases)} cases")


def main():
    gitdir = sys.argv[1]
    tag = sys.argv[2] if len(sys.argv) > 2 else "v3.14.0"
    commit = subprocess.run(["git", "--git-dir", gitdir, "rev-parse", tag + "^{commit}"],
                            check=True, capture_output=True, text=True).stdout.strip()
    write("relabel.json", *extract_relabel(gitdir, tag, commit))
    write("bad_configs.json", *extract_bad_configs(gitdir, tag, commit))
    write("selectors.json", *extract_selectors(gitdir, tag, commit))


if __name__ == "__main__":
    main()
