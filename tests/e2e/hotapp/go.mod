module profd.test/hotapp

go 1.19
