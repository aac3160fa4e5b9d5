// Package sqlread is the read-only guard of the SQL transports (hedgepgx,
// hedgesql): it tells whether a text is one statement that starts with a
// read keyword, by a lexer that knows SQL's quoting well enough to find
// where statements end. Each transport wraps its refusal in its own
// sentinel error.
//
// It reads SQL as PostgreSQL does with standard_conforming_strings on,
// its default: white space; -- comments to the end of the line; nested
// /* */ comments; '...' strings, in which a doubled quote stands for
// one; E'...' strings, where a backslash also escapes; "..." identifiers,
// in which a doubled quote stands for one; $tag$...$tag$ strings (but
// $1 is a parameter, and a $ inside a word is part of it).
// Check may also read the text as Backslash does (MySQL, and PostgreSQL
// with standard_conforming_strings off): a backslash escapes in every
// '...' and "..." string, # starts a comment, `...` quotes an identifier,
// /* */ comments do not nest, and $ is a letter. A text refused by any
// reading is refused.
//
// What it cannot see: what a read statement does when it runs. A SELECT
// may call a function that writes (nextval, a function of the
// application's), lock rows (FOR UPDATE), or write through dblink. A
// standby refuses most of these (SQLSTATE 25006), the primary runs them.
package sqlread

import (
	"errors"
	"fmt"
	"strings"
)

// Dialect is a way of reading quotes and comments.
type Dialect int

const (
	// Postgres reads SQL as PostgreSQL does with standard_conforming_strings
	// on.
	Postgres Dialect = iota
	// Backslash reads SQL as MySQL does, and as PostgreSQL does with
	// standard_conforming_strings off: a backslash escapes the next
	// character in every '...' and "..." string.
	Backslash
)

// Kind says why a text was refused.
type Kind int

const (
	// Empty: no statement at all, only white space and comments.
	Empty Kind = iota + 1
	// NotRead: the statement does not start with a read keyword.
	NotRead
	// Several: a second statement follows a ';'.
	Several
	// WritingWith: a WITH query holds an INSERT, UPDATE, DELETE or MERGE.
	WritingWith
	// Unclosed: a comment, string or quoted identifier is not closed.
	Unclosed
)

// Refusal is the error of Check: why sql is not one read statement.
type Refusal struct {
	Kind Kind
	// Word is the keyword at fault: the first one (NotRead), or the
	// writing one (WritingWith).
	Word string
	// Offset is the byte offset in the text of what is at fault: the
	// second statement (Several), or the quote or comment not closed
	// (Unclosed).
	Offset int
}

// Error describes the refusal, without advice: the transports add theirs.
func (r *Refusal) Error() string {
	switch r.Kind {
	case Empty:
		return "the SQL has no statement"
	case NotRead:
		return fmt.Sprintf("the statement starts with %q", r.Word)
	case Several:
		return fmt.Sprintf("the SQL holds several statements (the second starts at byte %d)", r.Offset)
	case WritingWith:
		return fmt.Sprintf("the WITH query holds a %s", strings.ToUpper(r.Word))
	case Unclosed:
		return fmt.Sprintf("a comment, string or quoted identifier opened at byte %d is not closed", r.Offset)
	}
	return "not a read"
}

// ReadKeywords are the keywords a read statement may start with.
var ReadKeywords = []string{"SELECT", "WITH", "VALUES", "TABLE", "SHOW"}

// writeKeywords start the data-modifying statements a WITH may hold.
var writeKeywords = []string{"INSERT", "UPDATE", "DELETE", "MERGE"}

// Check returns nil if sql, read as PostgreSQL reads it, is one statement
// (a trailing ';' allowed) that starts with a read keyword (after white
// space, comments and opening parentheses) and whose WITH holds no
// data-modifying statement, and a *Refusal otherwise. Each dialect in
// also is read too, and a second statement or a writing WITH found by
// any of them refuses sql (an unclosed quote in those readings does not:
// PostgreSQL may close it where they do not).
func Check(sql string, also ...Dialect) error {
	if r := check(sql, Postgres); r != nil {
		return r
	}
	for _, d := range also {
		if r := check(sql, d); r != nil && (r.Kind == Several || r.Kind == WritingWith) {
			return r
		}
	}
	return nil
}

func check(sql string, d Dialect) *Refusal {
	lx := lexer{src: sql, d: d}
	t := lx.next()
	for t.kind == tokOpen {
		t = lx.next()
	}
	switch {
	case t.kind == tokUnclosed:
		return &Refusal{Kind: Unclosed, Offset: t.pos}
	case t.kind == tokEOF || t.kind == tokSemi:
		return &Refusal{Kind: Empty}
	case t.kind != tokWord || !isOneOf(t.text, ReadKeywords):
		return &Refusal{Kind: NotRead, Word: t.text}
	}
	// prev2 and prev are the two tokens before t.
	var prev, prev2 token
	for {
		prev2, prev, t = prev, t, lx.next()
		switch t.kind {
		case tokEOF:
			return nil
		case tokUnclosed:
			return &Refusal{Kind: Unclosed, Offset: t.pos}
		case tokWord:
			// name AS [[NOT] MATERIALIZED] ( INSERT ...
			if prev.kind == tokOpen && isOneOf(t.text, writeKeywords) &&
				prev2.kind == tokWord && (strings.EqualFold(prev2.text, "AS") || strings.EqualFold(prev2.text, "MATERIALIZED")) {
				return &Refusal{Kind: WritingWith, Word: t.text}
			}
		case tokSemi:
			for {
				t = lx.next()
				switch t.kind {
				case tokSemi:
					continue
				case tokEOF:
					return nil
				case tokUnclosed:
					return &Refusal{Kind: Unclosed, Offset: t.pos}
				}
				return &Refusal{Kind: Several, Offset: t.pos}
			}
		}
	}
}

func isOneOf(w string, set []string) bool {
	for _, k := range set {
		if strings.EqualFold(w, k) {
			return true
		}
	}
	return false
}

type tokKind int

const (
	tokEOF      tokKind = iota
	tokWord             // an unquoted word: a keyword or an identifier
	tokOpen             // (
	tokSemi             // ;
	tokOther            // anything else: a literal, a quoted name, an operator
	tokUnclosed         // a comment, string or quoted name without its end
)

type token struct {
	kind tokKind
	text string // of a word, or of the single byte of tokOther
	pos  int
}

// lexer splits SQL into tokens, skipping white space and comments.
type lexer struct {
	src string
	i   int
	d   Dialect
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isWordStart(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || c == '_' || c >= 0x80
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isWordByte reports whether c continues a word: in both dialects a $
// inside a word is part of it.
func isWordByte(c byte) bool { return isWordStart(c) || isDigit(c) || c == '$' }

func (lx *lexer) next() token {
	s := lx.src
	for lx.i < len(s) {
		start := lx.i
		c := s[lx.i]
		switch {
		case isSpace(c):
			lx.i++
		case strings.HasPrefix(s[lx.i:], "--") || c == '#' && lx.d == Backslash:
			for lx.i < len(s) && s[lx.i] != '\n' && s[lx.i] != '\r' {
				lx.i++
			}
		case strings.HasPrefix(s[lx.i:], "/*"):
			if !lx.skipBlockComment() {
				return token{kind: tokUnclosed, pos: start}
			}
		case c == '\'':
			if !lx.skipQuoted('\'', lx.d == Backslash) {
				return token{kind: tokUnclosed, pos: start}
			}
			return token{kind: tokOther, text: "'", pos: start}
		case c == '"':
			if !lx.skipQuoted('"', lx.d == Backslash) {
				return token{kind: tokUnclosed, pos: start}
			}
			return token{kind: tokOther, text: `"`, pos: start}
		case c == '`' && lx.d == Backslash:
			if !lx.skipQuoted('`', false) {
				return token{kind: tokUnclosed, pos: start}
			}
			return token{kind: tokOther, text: "`", pos: start}
		case c == '$' && lx.d == Postgres:
			if tag, ok := dollarTag(s[lx.i:]); ok {
				end := strings.Index(s[lx.i+len(tag):], tag)
				if end < 0 {
					return token{kind: tokUnclosed, pos: start}
				}
				lx.i += len(tag) + end + len(tag)
				return token{kind: tokOther, text: "$", pos: start}
			}
			lx.i++ // a parameter, $1: its digits follow as a number
			return token{kind: tokOther, text: "$", pos: start}
		case isWordStart(c) || c == '$':
			for lx.i < len(s) && isWordByte(s[lx.i]) {
				lx.i++
			}
			w := s[start:lx.i]
			if lx.d == Postgres && (w == "E" || w == "e") && lx.i < len(s) && s[lx.i] == '\'' {
				if !lx.skipQuoted('\'', true) {
					return token{kind: tokUnclosed, pos: start}
				}
				return token{kind: tokOther, text: "'", pos: start}
			}
			return token{kind: tokWord, text: w, pos: start}
		case isDigit(c):
			for lx.i < len(s) && (isDigit(s[lx.i]) || isWordStart(s[lx.i]) || s[lx.i] == '.') {
				lx.i++
			}
			return token{kind: tokOther, text: s[start:lx.i], pos: start}
		case c == '(':
			lx.i++
			return token{kind: tokOpen, text: "(", pos: start}
		case c == ';':
			lx.i++
			return token{kind: tokSemi, text: ";", pos: start}
		default:
			lx.i++
			return token{kind: tokOther, text: s[start:lx.i], pos: start}
		}
	}
	return token{kind: tokEOF, pos: len(s)}
}

// skipBlockComment skips the comment that starts at lx.i: nested in
// PostgreSQL, up to the first */ in Backslash. It reports whether the
// comment is closed.
func (lx *lexer) skipBlockComment() bool {
	s := lx.src
	depth := 0
	for lx.i < len(s) {
		switch {
		case strings.HasPrefix(s[lx.i:], "/*") && (depth == 0 || lx.d == Postgres):
			depth++
			lx.i += 2
		case strings.HasPrefix(s[lx.i:], "*/"):
			depth--
			lx.i += 2
			if depth == 0 {
				return true
			}
		default:
			lx.i++
		}
	}
	return false
}

// skipQuoted skips the quoted string or name that starts with q at lx.i
// (a doubled q stands for one; with backslash, a backslash escapes the
// next byte). It reports whether the quote is closed.
func (lx *lexer) skipQuoted(q byte, backslash bool) bool {
	s := lx.src
	lx.i++
	for lx.i < len(s) {
		c := s[lx.i]
		switch {
		case backslash && c == '\\':
			lx.i += 2
		case c == q && lx.i+1 < len(s) && s[lx.i+1] == q:
			lx.i += 2
		case c == q:
			lx.i++
			return true
		default:
			lx.i++
		}
	}
	lx.i = len(s)
	return false
}

// dollarTag returns the tag ("$$", "$x$") that opens a dollar-quoted
// string at the start of s, if one does: $, then nothing or a word that
// does not start with a digit and holds no $, then $.
func dollarTag(s string) (string, bool) {
	j := 1
	if j < len(s) && isWordStart(s[j]) {
		for j < len(s) && (isWordStart(s[j]) || isDigit(s[j])) {
			j++
		}
	}
	if j < len(s) && s[j] == '$' {
		return s[:j+1], true
	}
	return "", false
}

// Refuse wraps the refusal of Check in sentinel, the transport's
// ErrNotRead, with what to do about it: writes go through writeMethods
// ("Exec"), on the primary. It returns nil for a nil err.
func Refuse(sentinel, err error, writeMethods string) error {
	var r *Refusal
	if !errors.As(err, &r) {
		return err
	}
	var advice string
	switch r.Kind {
	case Several:
		advice = "a hedged read takes one statement, as every statement of the text would run on each server a copy goes to, the primary included: send each read on its own, or several through Read in a read-only transaction; send writes with " + writeMethods + ", on the primary"
	case Unclosed:
		advice = "close it; if the server reads the SQL otherwise, send it through Read"
	default:
		advice = "hedged reads take one SELECT, WITH, VALUES, TABLE or SHOW statement that does not write: send writes with " + writeMethods + ", on the primary"
	}
	return fmt.Errorf("%w: %v; %s", sentinel, r, advice)
}
