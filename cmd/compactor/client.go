package main

import "github.com/spf13/cobra"

// addClientCommands adds the commands that control a running server.
func addClientCommands(root *cobra.Command, g *globals) {}
