package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// The client configuration file holds named contexts, as kubectl's
// kubeconfig and gh's hosts.yml do: each says where a server is and how to
// reach it, and one of them is current.
//
//	current-context: prod
//	contexts:
//	  prod:
//	    addr: https://compactor.example.com:7070
//	    token-file: ~/.config/compactor/prod.token
//	    cacert: /etc/ssl/certs/compactor-ca.pem
//	  local:
//	    addr: http://127.0.0.1:7070
//
// Relative paths (token-file, cacert) are relative to the file's directory;
// a leading ~/ is the home directory. Unknown keys are errors, to catch
// typos.

// clientConfig is a parsed configuration file; the zero value (no file)
// has no contexts.
type clientConfig struct {
	CurrentContext string                    `yaml:"current-context"`
	Contexts       map[string]*clientContext `yaml:"contexts"`

	path string // where it was read from; "" for none
}

// clientContext is one named context.
type clientContext struct {
	Addr      string `yaml:"addr"`
	Token     string `yaml:"token"`
	TokenFile string `yaml:"token-file"`
	CACert    string `yaml:"cacert"`
	Protocol  string `yaml:"protocol"`
}

// defaultConfigPath is the configuration file read when neither --config
// nor COMPACTOR_CONFIG names one: compactor/config.yaml under the user's
// configuration directory ($XDG_CONFIG_HOME, else ~/.config, on Linux).
func defaultConfigPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "compactor", "config.yaml")
}

// defaultConfigText names the default file for help texts, with the
// home directory written as ~.
func defaultConfigText() string {
	p := defaultConfigPath()
	if home, err := os.UserHomeDir(); err == nil && home != "" && strings.HasPrefix(p, home+string(filepath.Separator)) {
		return "~" + p[len(home):]
	}
	return p
}

// loadClientConfig reads the configuration file at path, or the default
// one when path is "" (a missing default file is no configuration; a
// missing named one is an error).
func loadClientConfig(path string) (*clientConfig, error) {
	named := path != ""
	if !named {
		path = defaultConfigPath()
		if path == "" {
			return &clientConfig{}, nil
		}
	}
	b, err := os.ReadFile(path)
	if !named && errors.Is(err, fs.ErrNotExist) {
		return &clientConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client configuration: %w", err)
	}
	var cfg clientConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	// io.EOF: an empty file, no configuration.
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("client configuration %s: %w", path, err)
	}
	cfg.path = path
	for name, c := range cfg.Contexts {
		if c == nil {
			return nil, fmt.Errorf("client configuration %s: context %q is empty", path, name)
		}
		if c.Token != "" && c.TokenFile != "" {
			return nil, fmt.Errorf("client configuration %s: context %q: give token or token-file, not both", path, name)
		}
	}
	return &cfg, nil
}

// pick returns the context named name, or the current one when name is
// "", with its name; nil when the file has no current context and none is
// named. An unknown name is an error listing the known ones.
func (c *clientConfig) pick(name string) (*clientContext, string, error) {
	if name == "" {
		name = c.CurrentContext
		if name == "" {
			return nil, "", nil
		}
	}
	if ctx := c.Contexts[name]; ctx != nil {
		return ctx, name, nil
	}
	where := "no configuration file"
	if c.path != "" {
		where = c.path
	}
	known := c.names()
	if len(known) == 0 {
		return nil, "", fmt.Errorf("context %q: %s has no contexts", name, where)
	}
	return nil, "", fmt.Errorf("context %q is not in %s (it has: %s)", name, where, strings.Join(known, ", "))
}

// names are the context names, sorted.
func (c *clientConfig) names() []string {
	var out []string
	for n := range c.Contexts {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// expand resolves a path of the file: ~/ is the home directory, and a
// relative path is relative to the file's directory.
func (c *clientConfig) expand(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if !filepath.IsAbs(p) && c.path != "" {
		return filepath.Join(filepath.Dir(c.path), p)
	}
	return p
}

// completeContexts completes --context with the names of the
// configuration file's contexts (--config and COMPACTOR_CONFIG apply).
func completeContexts(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		path := g.config
		if path == "" {
			path = os.Getenv("COMPACTOR_CONFIG")
		}
		cfg, err := loadClientConfig(path)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, n := range cfg.names() {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, cobra.CompletionWithDesc(n, safeText(cfg.Contexts[n].Addr)))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
