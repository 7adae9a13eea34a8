module profd.example/demo

go 1.19
