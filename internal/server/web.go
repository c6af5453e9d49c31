package server

func (a *App) mountWeb() error { return nil }
