package web_test

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// node is an element of a parsed page. The pages are parsed with
// encoding/xml in its lenient HTML mode (void elements, bare attributes,
// HTML entities), which is enough for what templ writes and also checks
// that every element is closed where it should be.
type node struct {
	Tag      string
	Attrs    map[string]string
	Children []*node
	parts    []any // text (string) and children (*node), in document order
}

func parseHTML(t *testing.T, body string) *node {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(body))
	d.Strict = false
	d.AutoClose = xml.HTMLAutoClose
	d.Entity = xml.HTMLEntity
	root := &node{Tag: "#root", Attrs: map[string]string{}}
	stack := []*node{root}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("parse page: %v\n%s", err, body)
		}
		top := stack[len(stack)-1]
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &node{Tag: strings.ToLower(tok.Name.Local), Attrs: map[string]string{}}
			for _, a := range tok.Attr {
				name := a.Name.Local
				if a.Name.Space != "" {
					name = a.Name.Space + ":" + name
				}
				n.Attrs[strings.ToLower(name)] = a.Value
			}
			top.Children = append(top.Children, n)
			top.parts = append(top.parts, n)
			stack = append(stack, n)
		case xml.EndElement:
			if len(stack) == 1 || stack[len(stack)-1].Tag != strings.ToLower(tok.Name.Local) {
				t.Fatalf("parse page: unexpected </%s>", tok.Name.Local)
			}
			stack = stack[:len(stack)-1]
		case xml.CharData:
			top.parts = append(top.parts, string(tok))
		}
	}
	if len(stack) != 1 {
		t.Fatalf("parse page: %d unclosed elements, innermost <%s>", len(stack)-1, stack[len(stack)-1].Tag)
	}
	return root
}

// Text is the element's text content with runs of white space collapsed.
func (n *node) Text() string {
	var b strings.Builder
	var walk func(*node)
	walk = func(n *node) {
		for _, p := range n.parts {
			switch p := p.(type) {
			case string:
				b.WriteString(p)
			case *node:
				walk(p)
			}
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// All returns every descendant for which match is true, in document order.
func (n *node) All(match func(*node) bool) []*node {
	var out []*node
	var walk func(*node)
	walk = func(n *node) {
		for _, c := range n.Children {
			if match(c) {
				out = append(out, c)
			}
			walk(c)
		}
	}
	walk(n)
	return out
}

// ByTestID returns the descendants with that data-testid.
func (n *node) ByTestID(id string) []*node {
	return n.All(func(c *node) bool { return c.Attrs["data-testid"] == id })
}

// One returns the single descendant with that data-testid.
func (n *node) One(t *testing.T, id string) *node {
	t.Helper()
	found := n.ByTestID(id)
	if len(found) != 1 {
		t.Fatalf("data-testid=%q: found %d elements, want 1", id, len(found))
	}
	return found[0]
}

// ByTag returns the descendants with that tag.
func (n *node) ByTag(tag string) []*node {
	return n.All(func(c *node) bool { return c.Tag == tag })
}

// Attr returns the value of an attribute and whether it is present.
func (n *node) Attr(name string) (string, bool) {
	v, ok := n.Attrs[name]
	return v, ok
}

// attrs returns one attribute of each node.
func attrs(ns []*node, name string) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Attrs[name]
	}
	return out
}

// texts returns the text of each node.
func texts(ns []*node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Text()
	}
	return out
}
