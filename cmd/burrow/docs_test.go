package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"burrow/config"
)

// The README and docs/*.md name commands, flags and configuration keys.
// These tests hold every such name against the command tree main runs and
// the configuration schema Parse accepts, so the docs cannot promise what
// the binary does not have.
//
// Only code is read, never prose: inline code spans, fenced code blocks,
// and lines typed at a shell prompt ("$ burrow ...", "alpha$ burrow ...")
// or indented as a code block. A command is a `burrow ...` span or a code
// line running burrow (or ./burrow, /tmp/burrow); a span that is only a
// flag (`--json`) must be a flag of some command. A configuration key is a
// span of dotted names starting with a configuration section
// (`overlay.successors`, `beacons[].websocket`), any span in the first
// column of a table headed "field", `.name` after a key (`turn.server`,
// `.username`: a sibling), or a key of a ```yaml block.

// TestDocsNameOnlyRealCommandsFlagsAndKeys checks the real docs.
func TestDocsNameOnlyRealCommandsFlagsAndKeys(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	c := newDocChecker()
	var findings []string
	for _, path := range files {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("../..", path)
		findings = append(findings, c.check(name, string(text))...)
	}
	if len(findings) > 0 {
		t.Errorf("the docs name commands, flags or configuration keys burrow does not have:\n%s", strings.Join(findings, "\n"))
	}
}

// TestDocsCheckFindsMistakes shows that the check can fail: of a document
// naming many real things in every form the docs use, it reports exactly
// the bogus command, flag and key.
func TestDocsCheckFindsMistakes(t *testing.T) {
	doc := strings.Join([]string{
		/* 1 */ "Run `burrow up -c FILE`, then `burrow frobnicate` and `burrow status\n" +
			/* 2 */ "--json | jq .links` (see `burrow completion bash\\|zsh\\|fish`).",
		/* 3 */ "",
		/* 4 */ "```sh",
		/* 5 */ "alpha$ burrow invite --ca DIR --name NAME [--address ADDR]... \\",
		/* 6 */ "           --bogus X          # prints: burrow join INVITE",
		/* 7 */ "/tmp/burrow sim e7 cost --n 100 && burrow cert sign --public-key <a key> --out a.crt",
		/* 8 */ "```",
		/* 9 */ "",
		/* 10 */ "| field | default |",
		/* 11 */ "| --- | --- |",
		/* 12 */ "| `network` | required |",
		/* 13 */ "| `turn.server`, `.username` | |",
		/* 14 */ "",
		/* 15 */ "```yaml",
		/* 16 */ "overlay:",
		/* 17 */ "  bootstrap: [203.0.113.10:51820]",
		/* 18 */ "  successorz: 3",
		/* 19 */ "beacons:",
		/* 20 */ "  - {address: 203.0.113.10:51820, websocket: ws://x/burrow}",
		/* 21 */ "```",
		/* 22 */ "burrow is also a word of prose here, and `overlay.go` a file name;",
		/* 23 */ "`links.dead_after` and `beacon.websocket.cert`, `.key` are keys.",
	}, "\n")
	got := newDocChecker().check("bad.md", doc)
	want := []string{
		"bad.md:1: `burrow frobnicate`: no such command",
		"bad.md:5: `burrow invite --bogus`: no such flag",
		"bad.md:18: `overlay.successorz`: no such configuration key",
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// reportFunc records a finding: on line, `what` is wrong as problem says.
type reportFunc func(line int, what, problem string)

// docChecker holds what the docs are checked against.
type docChecker struct {
	root *cobra.Command
	keys map[string]bool // every configuration key path, lists as "name[]"
}

func newDocChecker() *docChecker {
	// Execute adds these to the tree before it runs a command.
	rootCmd.InitDefaultHelpCmd()
	rootCmd.InitDefaultCompletionCmd()
	keys := map[string]bool{}
	addConfigKeys(keys, reflect.TypeFor[config.Config](), "")
	return &docChecker{root: rootCmd, keys: keys}
}

// addConfigKeys records the key paths of a configuration struct as
// yaml.v3 decodes it: by yaml tag, or the lower-cased field name.
func addConfigKeys(keys map[string]bool, t reflect.Type, prefix string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		key := prefix + name
		keys[key] = true
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch ft.Kind() {
		case reflect.Struct:
			addConfigKeys(keys, ft, key+".")
		case reflect.Slice:
			keys[key+"[]"] = true
			if ft.Elem().Kind() == reflect.Struct {
				addConfigKeys(keys, ft.Elem(), key+"[].")
			}
		}
	}
}

var (
	// fence opens or closes a fenced code block; the info string follows.
	fence = regexp.MustCompile("^\\s*(```|~~~)\\s*(\\S*)")
	// prompt is a shell prompt before a command: "$ ", "alpha$ ".
	prompt = regexp.MustCompile(`^\s*\S*\$\s+`)
	// keyPath is a configuration key as docs write it, list indexes
	// included: overlay.successors, peers[].endpoint, families[0].
	keyPath   = regexp.MustCompile(`^[a-z][a-z0-9_]*(\[\d*\])?(\.[a-z][a-z0-9_]*(\[\d*\])?)*$`)
	listIndex = regexp.MustCompile(`\[\d+\]`)
	// fileName ends in an extension no configuration key is named.
	fileName    = regexp.MustCompile(`\.(go|md|ya?ml|json|csv|svg|html|sh|txt)$`)
	placeholder = regexp.MustCompile(`<[^>]*>`)
)

// check returns a finding per mistake in the document text, as
// "name:line: `what`: what is wrong".
func (c *docChecker) check(name, text string) []string {
	var findings []string
	report := func(line int, what, problem string) {
		findings = append(findings, fmt.Sprintf("%s:%d: `%s`: %s", name, line, what, problem))
	}
	lines := strings.Split(text, "\n")
	var para []string // the current paragraph, for code spans broken over lines
	paraStart := 0
	flush := func() {
		if len(para) > 0 {
			c.checkParagraph(para, paraStart, report)
		}
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		if m := fence.FindStringSubmatch(lines[i]); m != nil {
			flush()
			end := i + 1
			for end < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[end]), m[1]) {
				end++
			}
			if m[2] == "yaml" {
				c.checkYAML(strings.Join(lines[i+1:end], "\n"), i+2, report)
			} else {
				c.checkCodeLines(lines[i+1:end], i+2, report)
			}
			i = end
			continue
		}
		if strings.TrimSpace(lines[i]) == "" {
			flush()
			continue
		}
		// Outside fences only prompts and indented code are commands:
		// prose may well begin with the word burrow.
		if prompt.MatchString(lines[i]) || strings.HasPrefix(lines[i], "    ") || strings.HasPrefix(lines[i], "\t") {
			c.checkCodeLines(lines[i:i+1], i+1, report)
		}
		if len(para) == 0 {
			paraStart = i + 1
		}
		para = append(para, lines[i])
	}
	flush()
	return findings
}

// checkCodeLines checks the burrow commands run by shell lines, the first
// of them on line first; a trailing backslash continues a line.
func (c *docChecker) checkCodeLines(lines []string, first int, report reportFunc) {
	for i := 0; i < len(lines); i++ {
		at, line := first+i, lines[i]
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + lines[i]
		}
		c.checkShell(commentless(prompt.ReplaceAllString(line, "")), at, report)
	}
}

// commentless cuts a shell comment off a line.
func commentless(line string) string {
	if strings.HasPrefix(line, "#") {
		return ""
	}
	if i := strings.Index(line, " #"); i >= 0 {
		return line[:i]
	}
	return line
}

// checkShell checks each burrow command of a shell line: commands are
// separated by &&, ||, ; and pipes between spaces (a pipe inside a word,
// as in bash|zsh|fish, is a choice between alternatives).
func (c *docChecker) checkShell(line string, at int, report reportFunc) {
	line = strings.ReplaceAll(line, `\|`, "|") // escaped in Markdown tables
	line = placeholder.ReplaceAllString(line, "X")
	for _, sep := range []string{"&&", "||", ";", " | "} {
		line = strings.ReplaceAll(line, sep, "\n")
	}
	for command := range strings.SplitSeq(line, "\n") {
		words := strings.Fields(command)
		if len(words) < 2 || !runsBurrow(words[0]) {
			continue
		}
		c.checkCommand(words[1:], at, report)
	}
}

// runsBurrow reports whether a command word runs the burrow binary:
// burrow on the PATH, ./burrow or an absolute path such as /tmp/burrow
// (but not a directory such as cmd/burrow in a file listing).
func runsBurrow(word string) bool {
	return word == "burrow" || strings.HasSuffix(word, "/burrow") && (strings.HasPrefix(word, "/") || strings.HasPrefix(word, "./"))
}

// checkCommand walks the words after "burrow" down the command tree,
// checking each flag against the command reached so far.
func (c *docChecker) checkCommand(words []string, at int, report reportFunc) {
	cmd := c.root
	path := "burrow"
	args := false // a positional argument came: no subcommands after it
	for i := 0; i < len(words); i++ {
		w := strings.TrimSuffix(strings.NewReplacer("[", "", "]", "").Replace(words[i]), "...")
		switch {
		case w == "":
		case strings.HasPrefix(w, ">"):
			return // a redirection: the command ends
		case strings.HasPrefix(w, "-") && len(w) > 1:
			f := lookupFlag(cmd, w)
			if f == nil {
				flag, _, _ := strings.Cut(w, "=")
				report(at, path+" "+flag, "no such flag")
				args = true // its value, if any, must not pass for a subcommand
				continue
			}
			if f.NoOptDefVal == "" && !strings.Contains(w, "=") {
				i++ // the flag's value
			}
		case args:
		default:
			alternatives := strings.Split(w, "|")
			sub := subcommand(cmd, alternatives[0])
			if sub == nil {
				if cmd.Runnable() {
					args = true
					continue
				}
				if strings.ToUpper(w) == w {
					return // a placeholder such as COMMAND: nothing more to check
				}
				report(at, path+" "+w, "no such command")
				return
			}
			for _, alt := range alternatives[1:] {
				if subcommand(cmd, alt) == nil {
					report(at, path+" "+alt, "no such command")
				}
			}
			cmd, path = sub, path+" "+alternatives[0]
		}
	}
}

func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, sub := range cmd.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// lookupFlag finds --name, --name=value or -x among a command's own and
// inherited flags.
func lookupFlag(cmd *cobra.Command, word string) *pflag.Flag {
	cmd.InitDefaultHelpFlag() // as Execute does
	name, _, _ := strings.Cut(strings.TrimLeft(word, "-"), "=")
	for _, set := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags()} {
		switch {
		case strings.HasPrefix(word, "--"):
			if f := set.Lookup(name); f != nil {
				return f
			}
		case len(name) == 1: // shorthands are one letter
			if f := set.ShorthandLookup(name); f != nil {
				return f
			}
		}
	}
	return nil
}

// someCommandHas reports whether any command in the tree has the flag.
func (c *docChecker) someCommandHas(flag string) bool {
	var has func(cmd *cobra.Command) bool
	has = func(cmd *cobra.Command) bool {
		return lookupFlag(cmd, flag) != nil || slices.ContainsFunc(cmd.Commands(), has)
	}
	return has(c.root)
}

// checkParagraph checks the code spans of a paragraph that starts on line
// first. A span may go on over a line break, except in a table.
func (c *docChecker) checkParagraph(para []string, first int, report reportFunc) {
	if !strings.HasPrefix(strings.TrimSpace(para[0]), "|") {
		c.checkSpans(strings.Join(para, "\n"), first, report, false)
		return
	}
	fieldTable := tableCells(para[0])[0] == "field"
	for i, row := range para {
		cells := tableCells(row)
		if fieldTable && i >= 2 && len(cells) > 0 {
			c.checkSpans(cells[0], first+i, report, true)
			row = strings.Join(cells[1:], "|")
		}
		c.checkSpans(row, first+i, report, false)
	}
}

// tableCells splits a Markdown table row into its trimmed cells.
func tableCells(row string) []string {
	row = strings.Trim(strings.TrimSpace(row), "|")
	cells := strings.Split(strings.ReplaceAll(row, `\|`, "\x00"), "|")
	for i, cell := range cells {
		cells[i] = strings.TrimSpace(strings.ReplaceAll(cell, "\x00", `\|`))
	}
	return cells
}

// checkSpans checks the code spans of text starting on line first. With
// keysOnly (the first column of a configuration table) every span is a
// key; otherwise spans are commands, keys, or neither.
func (c *docChecker) checkSpans(text string, first int, report reportFunc, keysOnly bool) {
	lastKey := ""
	for offset := 0; ; {
		open := strings.IndexByte(text[offset:], '`')
		if open < 0 {
			return
		}
		open += offset
		closing := strings.IndexByte(text[open+1:], '`')
		if closing < 0 {
			return
		}
		closing += open + 1
		span := strings.ReplaceAll(text[open+1:closing], "\n", " ")
		at := first + strings.Count(text[:open], "\n")
		offset = closing + 1
		switch {
		case !keysOnly && strings.HasPrefix(span, "burrow "):
			c.checkShell(span, at, report)
		case !keysOnly && strings.HasPrefix(span, "--") && len(span) > 2:
			// A flag on its own (`--json`): some command must have it.
			flag, _, _ := strings.Cut(strings.Fields(span)[0], "=")
			if !c.someCommandHas(flag) {
				report(at, flag, "no command has this flag")
			}
		case strings.HasPrefix(span, ".") && lastKey != "":
			// A sibling of the key before: `turn.server`, `.username`.
			parent := lastKey[:strings.LastIndexByte(lastKey, '.')+1]
			c.checkKey(parent+span[1:], at, report)
		case keyPath.MatchString(span) && (keysOnly || c.isSection(span)):
			c.checkKey(span, at, report)
			if strings.Contains(span, ".") {
				lastKey = span
			}
		}
	}
}

// isSection reports whether a dotted span starts with a configuration
// section (overlay.successors), rather than naming a file: ca.crt (ca is a
// key, but holds a path) or overlay.go.
func (c *docChecker) isSection(span string) bool {
	section, _, dotted := strings.Cut(span, ".")
	if !dotted || fileName.MatchString(span) {
		return false
	}
	section = listIndex.ReplaceAllString(section, "[]")
	for k := range c.keys {
		if strings.HasPrefix(k, section+".") || strings.HasPrefix(k, section+"[].") {
			return true
		}
	}
	return false
}

func (c *docChecker) checkKey(key string, at int, report reportFunc) {
	if !c.keys[listIndex.ReplaceAllString(key, "[]")] {
		report(at, key, "no such configuration key")
	}
}

// checkYAML checks every key of a YAML block whose first line is first.
func (c *docChecker) checkYAML(block string, first int, report reportFunc) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		report(first, "yaml block", "not YAML: "+err.Error())
		return
	}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, child := range n.Content {
				walk(child, prefix)
			}
		case yaml.SequenceNode:
			for _, item := range n.Content {
				walk(item, prefix+"[]")
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i]
				path := key.Value
				if prefix != "" {
					path = prefix + "." + key.Value
				}
				c.checkKey(path, first+key.Line-1, report)
				walk(n.Content[i+1], path)
			}
		}
	}
	walk(&doc, "")
}
