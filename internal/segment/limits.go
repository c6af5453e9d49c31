package segment

// MaxBlockRecords is the most records a block this store writes holds
// (Config.MaxBlockRecords after defaults).
func (s *Store) MaxBlockRecords() int { return s.cfg.MaxBlockRecords }
