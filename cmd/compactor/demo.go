package main

import "github.com/spf13/cobra"

func newDemoCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "demo", Hidden: true}
}
