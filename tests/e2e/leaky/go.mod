module profd.example/leaky

go 1.19
