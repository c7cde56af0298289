package shop

import "fmt"

func Greet(name string) string {
	if name == "" {
		name = "stranger"
	}
	return fmt.Sprintf("hello, %s", name)
}

func Farewell(name string) string {
	if name == "" {
		return "goodbye"
	}
	return fmt.Sprintf("goodbye, %s", name)
}
