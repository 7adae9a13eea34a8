module profd.example/labelled

go 1.19
