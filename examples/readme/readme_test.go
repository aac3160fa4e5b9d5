package readme

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// guides are the Markdown pages whose Go snippets this package compiles
// and runs, and whose relative links must resolve.
func guides(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md", "../../cmd/hedge/README.md"}, docs...)
}

// TestSnippetsAreTested checks that each ```go block of the README, the
// tools' page and the guides in docs/ appears, line for line (leading
// indentation aside), in one of this package's test files, where it is
// compiled and run.
func TestSnippetsAreTested(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var code []string
	for _, f := range files {
		if f == "readme_test.go" || f == "links_test.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code = append(code, normalise(string(b))...)
	}
	total := 0
	for _, page := range guides(t) {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlocks(string(md))
		total += len(blocks)
		for i, b := range blocks {
			if !contains(code, normalise(b)) {
				t.Errorf("%s: Go snippet %d is not in this package's tests, so nothing compiles or runs it; copy it into a test here:\n%s", page, i+1, b)
			}
		}
	}
	if total == 0 {
		t.Fatal("no Go snippets found: the parser is broken")
	}
}

// goBlocks returns the bodies of the ```go fenced blocks of a Markdown text.
func goBlocks(md string) []string {
	var blocks []string
	var cur []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.TrimSpace(line) == "```go":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// normalise splits text into lines without their leading and trailing
// white space, dropping blank lines.
func normalise(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// contains reports whether needle occurs as a contiguous run of lines in
// haystack.
func contains(haystack, needle []string) bool {
	for i := 0; i+len(needle) <= len(haystack); i++ {
		match := true
		for j, l := range needle {
			if haystack[i+j] != l {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func TestContains(t *testing.T) {
	hay := normalise("a\n\tb\n  c\nd")
	if !contains(hay, normalise("b\nc")) || contains(hay, normalise("b\nd")) || !contains(hay, nil) {
		t.Fatal("contains is broken")
	}
	if got := goBlocks("x\n```go\na\n\tb\n```\n```sh\nc\n```\n"); len(got) != 1 || got[0] != "a\n\tb" {
		t.Fatalf("goBlocks = %q", got)
	}
}
