package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink matches an inline Markdown link or image, capturing its target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// relativeLinks returns the targets of a Markdown text's relative links,
// without their fragments, skipping code blocks and code spans.
func relativeLinks(md string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if in {
			continue
		}
		// Drop code spans, whose brackets are not links.
		parts := strings.Split(line, "`")
		for i := 0; i < len(parts); i += 2 {
			for _, m := range mdLink.FindAllStringSubmatch(parts[i], -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
					continue
				}
				if j := strings.IndexByte(target, '#'); j >= 0 {
					target = target[:j]
				}
				out = append(out, target)
			}
		}
	}
	return out
}

// TestRelativeLinksResolve checks that every relative link of the README,
// the tools' page, the guides in docs/ and BENCHMARKS.md points to a file
// or directory of the repository.
func TestRelativeLinksResolve(t *testing.T) {
	n := 0
	for _, page := range append(guides(t), "../../BENCHMARKS.md") {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range relativeLinks(string(md)) {
			n++
			p := filepath.Join(filepath.Dir(page), filepath.FromSlash(target))
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links to %s, which does not exist: fix the link or restore the file", page, target)
			}
		}
	}
	if n == 0 {
		t.Fatal("no relative links found: the parser is broken")
	}
}

func TestRelativeLinks(t *testing.T) {
	md := "see [a](a.md#x), [b](https://x.org/b), ![c](img/c.png), [d](#top), `[e](e.md)`\n```\n[f](f.md)\n```\n"
	got := strings.Join(relativeLinks(md), ",")
	if got != "a.md,img/c.png" {
		t.Fatalf("relativeLinks = %q, want a.md,img/c.png", got)
	}
}
