module profd.test/collect/target

go 1.19
